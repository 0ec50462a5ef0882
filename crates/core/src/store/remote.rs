//! Object stores reached over HTTP (S3, GCS, Azure): building the
//! `object_store` client for a URL, and saying why a request to one
//! failed in the user's terms: the endpoint cannot be reached, there are
//! no credentials or the store refuses them, the bucket does not exist.
//! Anything else stays the store's own error.

use std::sync::Arc;

use futures::future::BoxFuture;
use object_store::client::{HttpError, HttpErrorKind};
use object_store::path::Path;
use object_store::ObjectStore;

use super::{StoreConfig, StoreError};

/// Retries of one request by object_store's HTTP client (the store
/// module's docs say who retries what).
const CLIENT_RETRIES: usize = 10;

/// Which service a remote store is, for its credential advice.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Service {
    S3,
    Gcs,
    Azure,
}

impl Service {
    /// Where this service's credentials come from.
    pub(super) fn credentials_hint(self) -> &'static str {
        match self {
            Service::S3 => {
                "set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (and AWS_SESSION_TOKEN for \
                 temporary credentials), or run where instance or container credentials are \
                 available"
            }
            Service::Gcs => {
                "set GOOGLE_SERVICE_ACCOUNT (or GOOGLE_APPLICATION_CREDENTIALS) to a service \
                 account key file, or run where instance credentials are available"
            }
            Service::Azure => {
                "set AZURE_STORAGE_ACCOUNT_NAME and AZURE_STORAGE_ACCOUNT_KEY (or \
                 AZURE_STORAGE_SAS_KEY), or run where managed identity credentials are available"
            }
        }
    }
}

/// Fetches the store's credentials, as its requests would.
type CredentialCheck = Arc<dyn Fn() -> BoxFuture<'static, object_store::Result<()>> + Send + Sync>;

/// What packfs knows of a remote store besides its client.
#[derive(Clone)]
pub(super) struct Remote {
    pub(super) service: Service,
    /// The URL requests go to, for messages.
    pub(super) endpoint: String,
    pub(super) bucket: String,
    pub(super) allow_http: bool,
    /// No request goes to a credentials service (keys given, requests
    /// unsigned, or credentials fetched already): a transport failure can
    /// only be the endpoint's.
    pub(super) credentials_in_hand: bool,
    credentials: CredentialCheck,
}

/// An `object_store` client opened by [`open`].
pub(super) struct Opened {
    pub(super) inner: Arc<dyn ObjectStore>,
    /// The dataset's prefix in the store.
    pub(super) root: Path,
    /// `None` for `memory://`.
    pub(super) remote: Option<Remote>,
}

/// The `object_store` client for a URL, configured from the usual
/// environment variables (`AWS_*`, `GOOGLE_*`, `AZURE_*`), overridden by
/// `config`, and what packfs knows of it. Built here rather than by
/// `parse_url_opts` because that cannot set the retry policy.
pub(super) fn open(url: &url::Url, config: &StoreConfig) -> Result<Opened, String> {
    use object_store::aws::{AmazonS3Builder, AmazonS3ConfigKey as S3Key};
    use object_store::azure::{AzureConfigKey, MicrosoftAzureBuilder};
    use object_store::gcp::{GoogleCloudStorageBuilder, GoogleConfigKey};
    use object_store::{ClientConfigKey as Client, ObjectStoreScheme as Scheme};
    let (scheme, root) = Scheme::parse(url).map_err(|e| e.to_string())?;
    let options = &config.options;
    let retry = object_store::RetryConfig {
        backoff: Default::default(),
        max_retries: CLIENT_RETRIES,
        retry_timeout: options.retry_deadline,
    };
    let mut client = vec![
        (
            Client::Timeout,
            format!("{}ms", options.timeout.as_millis()),
        ),
        (
            Client::ConnectTimeout,
            format!("{}ms", options.connect_timeout.as_millis()),
        ),
    ];
    if config.allow_http {
        client.push((Client::AllowHttp, "true".into()));
    }
    let bucket = url.host_str().unwrap_or_default().to_string();
    let failed = |e: object_store::Error| e.to_string();
    // Builds the client and describes it. The three builders share this
    // shape but no trait, and their credential types differ.
    macro_rules! remote {
        ($builder:expr, $service:expr, $endpoint:expr, $allow_http:expr, $in_hand:expr) => {{
            let store = $builder.with_retry(retry).build().map_err(failed)?;
            let provider = store.credentials().clone();
            let credentials: CredentialCheck = Arc::new(move || {
                let provider = provider.clone();
                Box::pin(async move { provider.get_credential().await.map(|_| ()) })
            });
            let remote = Remote {
                service: $service,
                endpoint: $endpoint,
                bucket,
                allow_http: $allow_http.is_some_and(|v: String| v == "true"),
                credentials_in_hand: $in_hand,
                credentials,
            };
            (Arc::new(store) as Arc<dyn ObjectStore>, Some(remote))
        }};
    }
    let (inner, remote) = match scheme {
        Scheme::Memory => (
            Arc::new(object_store::memory::InMemory::new()) as Arc<dyn ObjectStore>,
            None,
        ),
        Scheme::AmazonS3 => {
            let mut b = AmazonS3Builder::from_env().with_url(url.as_str());
            if let Some(endpoint) = &config.endpoint {
                b = b.with_endpoint(endpoint);
            }
            if let Some(region) = &config.region {
                b = b.with_region(region);
            }
            if config.path_style {
                b = b.with_config(S3Key::VirtualHostedStyleRequest, "false");
            }
            let b = client.into_iter().fold(b, |b, (key, value)| {
                b.with_config(S3Key::Client(key), value)
            });
            let value = |key| b.get_config_value(&key);
            let region = value(S3Key::Region).unwrap_or_else(|| "us-east-1".into());
            let endpoint = value(S3Key::Endpoint)
                .unwrap_or_else(|| format!("https://s3.{region}.amazonaws.com"));
            let keys = value(S3Key::AccessKeyId).is_some()
                || value(S3Key::SkipSignature).is_some_and(|v| v == "true");
            let allow_http = value(S3Key::Client(Client::AllowHttp));
            remote!(b, Service::S3, endpoint, allow_http, keys)
        }
        Scheme::GoogleCloudStorage => {
            let b = client.into_iter().fold(
                GoogleCloudStorageBuilder::from_env().with_url(url.as_str()),
                |b, (key, value)| b.with_config(GoogleConfigKey::Client(key), value),
            );
            let allow_http = b.get_config_value(&GoogleConfigKey::Client(Client::AllowHttp));
            let endpoint = "https://storage.googleapis.com".to_string();
            remote!(b, Service::Gcs, endpoint, allow_http, false)
        }
        Scheme::MicrosoftAzure => {
            let b = client.into_iter().fold(
                MicrosoftAzureBuilder::from_env().with_url(url.as_str()),
                |b, (key, value)| b.with_config(AzureConfigKey::Client(key), value),
            );
            let value = |key| b.get_config_value(&key);
            let account = value(AzureConfigKey::AccountName).unwrap_or_default();
            let endpoint = value(AzureConfigKey::Endpoint)
                .unwrap_or_else(|| format!("https://{account}.blob.core.windows.net"));
            let allow_http = value(AzureConfigKey::Client(Client::AllowHttp));
            remote!(b, Service::Azure, endpoint, allow_http, false)
        }
        other => return Err(format!("{other:?} URLs are not supported")),
    };
    Ok(Opened {
        inner,
        root,
        remote,
    })
}

/// Why a request to a remote store failed, where packfs can say so in
/// the user's terms.
#[derive(Debug, PartialEq, Eq)]
enum Diagnosis {
    /// No connection (refused, timed out, no such host), or one object_store
    /// would not open (plain http:// while `allow_http` is off).
    Unreachable { reason: String, plain_http: bool },
    /// The store answered 401 or 403.
    Denied { reason: String },
}

impl Remote {
    /// Fetches the credentials requests would be signed with: an error if
    /// there are none (no keys, and no instance or container credentials).
    pub(super) async fn check_credentials(&self) -> object_store::Result<()> {
        (self.credentials)().await
    }

    /// Where this store's credentials come from.
    pub(super) fn credentials_hint(&self) -> &'static str {
        self.service.credentials_hint()
    }

    /// The error for a request, made doing `context`, that found no bucket.
    pub(super) fn no_such_bucket(&self, context: &str) -> StoreError {
        StoreError::NoSuchBucket {
            context: context.to_string(),
            bucket: self.bucket.clone(),
            endpoint: self.endpoint.clone(),
        }
    }

    /// The same store known to have its credentials (fetched by
    /// [`Remote::check_credentials`]): its transport failures are the
    /// endpoint's from now on.
    pub(super) fn with_credentials_in_hand(&self) -> Remote {
        Remote {
            credentials_in_hand: true,
            ..self.clone()
        }
    }

    /// `source` in the user's terms, or `None` if it is not a failure to
    /// reach the store or to be let in. `context` says what was being done.
    pub(super) fn explain(
        &self,
        context: &str,
        source: &object_store::Error,
    ) -> Option<StoreError> {
        let diagnosis = diagnose(source)?;
        let context = context.to_string();
        let endpoint = self.endpoint.clone();
        Some(match diagnosis {
            // A transport failure may be one of a credentials service's
            // unless every request goes to the endpoint.
            Diagnosis::Unreachable { .. } if !self.credentials_in_hand => return None,
            Diagnosis::Unreachable { reason, plain_http } => StoreError::Unreachable {
                context,
                endpoint,
                reason,
                plain_http_refused: plain_http
                    && !self.allow_http
                    && self.endpoint.starts_with("http://"),
            },
            Diagnosis::Denied { reason } => StoreError::AccessDenied {
                context,
                endpoint,
                reason,
                hint: self.service.credentials_hint(),
            },
        })
    }
}

/// Looks through `e` for a transport failure or a refusal.
fn diagnose(e: &object_store::Error) -> Option<Diagnosis> {
    use object_store::Error as E;
    match e {
        E::PermissionDenied { source, .. } | E::Unauthenticated { source, .. } => {
            let status = match e {
                E::PermissionDenied { .. } => "403 Forbidden",
                _ => "401 Unauthorized",
            };
            // The code of an S3-style error body (e.g. InvalidAccessKeyId),
            // never the body: it may echo the access key.
            let text = source.to_string();
            let reason = match xml_code(&text) {
                Some(code) => format!("{status} ({code})"),
                None => status.to_string(),
            };
            Some(Diagnosis::Denied { reason })
        }
        E::Generic { source, .. } => {
            let http = chain(source.as_ref()).find_map(|e| e.downcast_ref::<HttpError>())?;
            let root = chain(http).last().unwrap_or(http);
            let io = chain(http).find_map(|e| e.downcast_ref::<std::io::Error>());
            let reason = match (http.kind(), io.map(|e| e.kind())) {
                (HttpErrorKind::Connect, Some(std::io::ErrorKind::ConnectionRefused)) => {
                    "connection refused".into()
                }
                (HttpErrorKind::Connect, Some(std::io::ErrorKind::TimedOut))
                | (HttpErrorKind::Timeout, _) => "timed out".into(),
                (HttpErrorKind::Connect, _) => root.to_string(),
                // A request object_store's client would not send (e.g. a
                // plain http:// URL it is not allowed to use).
                (HttpErrorKind::Unknown, _) => {
                    return Some(Diagnosis::Unreachable {
                        reason: format!("the request could not be sent ({root})"),
                        plain_http: true,
                    })
                }
                // Cut off mid-request or mid-body: the store was reached.
                _ => return None,
            };
            Some(Diagnosis::Unreachable {
                reason,
                plain_http: false,
            })
        }
        _ => None,
    }
}

/// `e` and its sources, outermost first.
fn chain<'a>(
    e: &'a (dyn std::error::Error + 'static),
) -> impl Iterator<Item = &'a (dyn std::error::Error + 'static)> {
    std::iter::successors(Some(e), |e| e.source())
}

/// The `<Code>…</Code>` of an XML error body in `text`.
fn xml_code(text: &str) -> Option<&str> {
    let start = text.find("<Code>")? + "<Code>".len();
    let len = text[start..].find("</Code>")?;
    Some(&text[start..start + len]).filter(|code| code.chars().all(|c| c.is_ascii_alphanumeric()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn http(kind: HttpErrorKind, io: std::io::ErrorKind) -> object_store::Error {
        object_store::Error::Generic {
            store: "S3",
            source: Box::new(HttpError::new(kind, std::io::Error::from(io))),
        }
    }

    fn remote(credentials_in_hand: bool, endpoint: &str) -> Remote {
        Remote {
            service: Service::S3,
            endpoint: endpoint.into(),
            bucket: "b".into(),
            allow_http: false,
            credentials_in_hand,
            credentials: Arc::new(|| Box::pin(async { Ok(()) })),
        }
    }

    #[test]
    fn refused_and_timed_out_connections_are_unreachable() {
        use std::io::ErrorKind::{ConnectionRefused, TimedOut};
        let refused = diagnose(&http(HttpErrorKind::Connect, ConnectionRefused));
        assert_eq!(
            refused,
            Some(Diagnosis::Unreachable {
                reason: "connection refused".into(),
                plain_http: false
            })
        );
        let timed_out = diagnose(&http(HttpErrorKind::Timeout, TimedOut)).unwrap();
        assert!(
            matches!(timed_out, Diagnosis::Unreachable { reason, .. } if reason == "timed out")
        );
        // A connection cut mid-request reached the store.
        assert_eq!(
            diagnose(&http(HttpErrorKind::Request, ConnectionRefused)),
            None
        );
        assert_eq!(
            diagnose(&http(HttpErrorKind::Decode, std::io::ErrorKind::Other)),
            None
        );
    }

    #[test]
    fn refusals_name_the_status_and_code_but_not_the_body() {
        let body = "403 Forbidden: <Error><Code>InvalidAccessKeyId</Code>\
                    <AWSAccessKeyId>AKIDSECRETLY</AWSAccessKeyId></Error>";
        let e = object_store::Error::PermissionDenied {
            path: "p".into(),
            source: body.into(),
        };
        let text = remote(true, "http://127.0.0.1:9")
            .explain("probe", &e)
            .unwrap()
            .to_string();
        assert!(
            text.contains("access denied") && text.contains("InvalidAccessKeyId"),
            "{text}"
        );
        assert!(
            text.contains("AWS_ACCESS_KEY_ID") && !text.contains("AKIDSECRETLY"),
            "{text}"
        );
        let e = object_store::Error::Unauthenticated {
            path: "p".into(),
            source: "no".into(),
        };
        assert!(diagnose(&e).is_some());
    }

    #[test]
    fn transport_failures_are_the_endpoints_only_with_credentials_in_hand() {
        let e = http(
            HttpErrorKind::Connect,
            std::io::ErrorKind::ConnectionRefused,
        );
        let text = remote(true, "http://127.0.0.1:9")
            .explain("get x", &e)
            .unwrap()
            .to_string();
        assert_eq!(
            text,
            "get x: cannot reach http://127.0.0.1:9: connection refused"
        );
        assert!(remote(false, "http://127.0.0.1:9")
            .explain("get x", &e)
            .is_none());
        let e = http(HttpErrorKind::Unknown, std::io::ErrorKind::Other);
        let text = remote(true, "http://127.0.0.1:9")
            .explain("get x", &e)
            .unwrap()
            .to_string();
        assert!(
            text.ends_with("(plain HTTP is not allowed for this store)"),
            "{text}"
        );
        assert!(!remote(true, "https://s3.example")
            .explain("get x", &e)
            .unwrap()
            .to_string()
            .contains("plain HTTP"));
    }
}
