//! The byte-range engine: which source bytes, or explicit zero PAD, make up
//! each byte of a destination, and producing those bytes in few reads.
//!
//! A destination is described once and then only checked and executed:
//!
//! 1. build a [`ByteRangeMap`] (segments in any order, PAD explicit);
//! 2. [`ByteRangeMap::normalize`] sorts and merges it, rejecting gaps and
//!    overlaps, into a [`NormalizedMap`];
//! 3. [`ByteRangeProgram::compile`] schedules its reads per source in
//!    source order, coalescing nearby ranges under [`CoalesceLimits`];
//! 4. [`ByteRangeProgram::execute_into`] checks every read against the
//!    [`SeekableSource`]s' lengths, then reads each run straight into its
//!    places in the caller's buffer (a program with a strided run goes
//!    through a staging buffer); [`ByteRangeProgram::execute`] does the
//!    same into a buffer of its own.
//!
//! Compilation chooses only how bytes are fetched; the destination bytes
//! are the same under any limits. Missing source bytes are an error, never
//! zeros.

mod execute;
mod map;
mod program;
mod source;

#[cfg(test)]
mod properties;

pub use execute::ExecuteError;
pub use map::{
    ByteRangeMap, MapError, NormalizedMap, Segment, SegmentKind, SourceIndex, Uncovered,
};
pub use program::{ByteRangeProgram, CoalesceLimits, Piece, Run};
pub use source::{MemorySource, SeekableSource, SourceError, Target};
