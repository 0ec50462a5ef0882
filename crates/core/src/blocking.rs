//! Where blocking file I/O runs: inline on a thread that may block, else
//! on the runtime's blocking pool.
//!
//! A FUSE loop thread polls a request's future once before handing it to
//! the runtime (the FUSE adapter does). A read of a local file started in that
//! poll can run right there, as `squashfuse_ll` serves its reads: the
//! detour through the blocking pool costs two thread wake-ups per request,
//! which on a cold shuffled scan of small files was a quarter of the time
//! per file (docs/PERFORMANCE.md). Runtime worker threads must never
//! block, so they keep the pool.

use std::cell::Cell;
use std::future::Future;

thread_local! {
    static MAY_BLOCK: Cell<bool> = const { Cell::new(false) };
}

/// Runs `f` with blocking file I/O allowed on this thread: [`run`] calls
/// made inside it run their work inline.
pub fn allow<R>(f: impl FnOnce() -> R) -> R {
    let before = MAY_BLOCK.replace(true);
    let result = f();
    MAY_BLOCK.set(before);
    result
}

/// Runs blocking `work` inline inside [`allow`], else on the runtime's
/// blocking pool ([`spawn`]).
pub async fn run<R: Send + 'static>(work: impl FnOnce() -> R + Send + 'static) -> R {
    if MAY_BLOCK.get() {
        return work();
    }
    spawn(work).await
}

/// Runs blocking `work` on the runtime's blocking pool. A panic in `work`
/// resumes in the caller. Work the runtime cancelled (it was shutting down
/// before the work started) leaves the caller pending until the runtime
/// drops it too: there is no result to give, and a panic would only be
/// noise from a task nobody waits for.
pub async fn spawn<R: Send + 'static>(work: impl FnOnce() -> R + Send + 'static) -> R {
    match tokio::task::spawn_blocking(work).await {
        Ok(result) => result,
        Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
        Err(_) => std::future::pending().await,
    }
}

/// Runs `future` to its end from synchronous code: on a runtime worker
/// thread without stalling the runtime's other tasks, else on `runtime`.
pub fn wait<T>(runtime: &tokio::runtime::Handle, future: impl Future<Output = T>) -> T {
    match tokio::runtime::Handle::try_current() {
        Ok(handle) => tokio::task::block_in_place(|| handle.block_on(future)),
        Err(_) => runtime.block_on(future),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::future::Future;
    use std::pin::pin;
    use std::task::{Context, Poll, Waker};

    fn thread_name() -> Option<String> {
        std::thread::current().name().map(str::to_owned)
    }

    #[tokio::test]
    async fn inline_only_inside_allow() {
        let here = thread_name();
        // Outside `allow`, work goes to the pool: another thread.
        assert_ne!(run(thread_name).await, here);
        // Inside, the first poll runs it on this thread and completes.
        let inline = allow(|| {
            let mut task = pin!(run(thread_name));
            match task.as_mut().poll(&mut Context::from_waker(Waker::noop())) {
                Poll::Ready(name) => name,
                Poll::Pending => panic!("inline work left pending"),
            }
        });
        assert_eq!(inline, here);
        assert!(!MAY_BLOCK.get(), "allow restores the flag");
    }
}
