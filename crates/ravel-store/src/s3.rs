//! Opening an S3 store from the standard AWS environment variables.
//!
//! The HTTP client's defaults are bounded so that a server that refuses, or accepts and never
//! answers, fails a command within about half a minute instead of minutes: connections time
//! out after [`CONNECT_TIMEOUT`], requests after [`REQUEST_TIMEOUT`], the client retries a
//! request [`CLIENT_RETRIES`] times within [`RETRY_BUDGET`], and [`RetryStore`] leaves the
//! client's errors to it: it retries only bodies and listings broken after their answer began,
//! and starts no such attempt after [`RETRY_BUDGET`] either. A dead endpoint fails in the
//! client's own time. `AWS_CONNECT_TIMEOUT` and `AWS_TIMEOUT`
//! (durations such as `60s`) still override the two timeouts, e.g. for a slow uplink.

use std::time::Duration;

use object_store::aws::{AmazonS3, AmazonS3Builder, AmazonS3ConfigKey, S3ConditionalPut};
use object_store::{BackoffConfig, ClientConfigKey, ClientOptions, RetryConfig};

use crate::{RetryPolicy, RetryStore, StoreError, redacted};

/// Longest wait for a connection to the server.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// Longest time one request may take, body included (an object of the large tier, ~46 MB,
/// needs 1.5 MB/s to upload within it).
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
/// Retries of one request by the HTTP client.
pub const CLIENT_RETRIES: usize = 3;
/// No retry, by the client or by [`RetryStore`], starts later than this after a request's
/// first attempt.
pub const RETRY_BUDGET: Duration = Duration::from_secs(20);

/// The store name object_store's S3 client gives its errors (`Error::Generic`'s `store`).
pub(crate) const S3_CLIENT: &str = "S3";

/// The S3 client of `bucket` with its settings from the environment, wrapped in retries of
/// broken answers that name the endpoint when they give up.
pub(crate) fn open(url: &str, bucket: &str) -> Result<RetryStore<AmazonS3>, StoreError> {
    let builder = from_env(
        AmazonS3Builder::new()
            .with_client_options(client_options())
            .with_retry(retry_config()),
    );
    if let Some(missing) = missing_settings(&builder) {
        return Err(StoreError::MissingS3Settings {
            url: url.to_string(),
            missing,
        });
    }
    let endpoint = endpoint(&builder, bucket);
    let s3 = builder
        .with_bucket_name(bucket)
        .with_conditional_put(S3ConditionalPut::ETagMatch)
        .build()
        .map_err(|source| StoreError::Open {
            url: url.to_string(),
            source,
        })?;
    Ok(RetryStore::new(s3, RetryPolicy::default())
        .with_client_retries(S3_CLIENT)
        .with_budget(RETRY_BUDGET)
        .with_endpoint(endpoint))
}

fn client_options() -> ClientOptions {
    ClientOptions::new()
        .with_connect_timeout(CONNECT_TIMEOUT)
        .with_timeout(REQUEST_TIMEOUT)
}

fn retry_config() -> RetryConfig {
    RetryConfig {
        backoff: BackoffConfig::default(),
        max_retries: CLIENT_RETRIES,
        retry_timeout: RETRY_BUDGET,
    }
}

/// `builder` with every `AWS_*` variable object_store knows applied over it, as
/// `AmazonS3Builder::from_env` applies them over its defaults.
fn from_env(mut builder: AmazonS3Builder) -> AmazonS3Builder {
    for (key, value) in std::env::vars_os() {
        let (Some(key), Some(value)) = (key.to_str(), value.to_str()) else {
            continue;
        };
        if !key.starts_with("AWS_") {
            continue;
        }
        if let Ok(key) = key.to_ascii_lowercase().parse::<AmazonS3ConfigKey>() {
            builder = builder.with_config(key, value);
        }
    }
    builder
}

/// What the environment lacks to reach a server, in words that name the variables; `None`
/// when it has the minimum: a source of credentials and either an endpoint or a region.
fn missing_settings(b: &AmazonS3Builder) -> Option<String> {
    let has = |key: AmazonS3ConfigKey| b.get_config_value(&key).is_some_and(|v| !v.is_empty());
    let flag = |key: AmazonS3ConfigKey| {
        b.get_config_value(&key)
            .is_some_and(|v| !v.is_empty() && v != "false")
    };
    let mut missing = Vec::new();
    let key_id = has(AmazonS3ConfigKey::AccessKeyId);
    let secret = has(AmazonS3ConfigKey::SecretAccessKey);
    let other_credentials = (has(AmazonS3ConfigKey::WebIdentityTokenFile)
        && has(AmazonS3ConfigKey::RoleArn))
        || has(AmazonS3ConfigKey::ContainerCredentialsRelativeUri)
        || has(AmazonS3ConfigKey::ContainerCredentialsFullUri)
        || has(AmazonS3ConfigKey::MetadataEndpoint)
        || flag(AmazonS3ConfigKey::SkipSignature);
    if key_id != secret {
        let (set, unset) = if key_id {
            ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY")
        } else {
            ("AWS_SECRET_ACCESS_KEY", "AWS_ACCESS_KEY_ID")
        };
        missing.push(format!("{set} is set but {unset} is not"));
    } else if !key_id && !other_credentials {
        missing.push(
            "no credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (or \
             AWS_WEB_IDENTITY_TOKEN_FILE with AWS_ROLE_ARN, AWS_CONTAINER_CREDENTIALS_RELATIVE_URI, \
             AWS_CONTAINER_CREDENTIALS_FULL_URI, AWS_METADATA_ENDPOINT for an instance's role, or \
             AWS_SKIP_SIGNATURE=true for a public bucket)"
                .to_string(),
        );
    }
    let located = has(AmazonS3ConfigKey::Endpoint)
        || has(AmazonS3ConfigKey::S3Endpoint)
        || has(AmazonS3ConfigKey::Region);
    if !located {
        missing.push(
            "no server: set AWS_ENDPOINT_URL (or AWS_ENDPOINT, AWS_ENDPOINT_URL_S3) for an \
             S3-compatible server, or AWS_REGION (or AWS_DEFAULT_REGION) for AWS"
                .to_string(),
        );
    }
    if let Some(e) = plain_http_endpoint(b) {
        missing.push(format!(
            "the endpoint {} is plain HTTP: set AWS_ALLOW_HTTP=true to allow it (or use https://)",
            redacted(&e)
        ));
    }
    (!missing.is_empty()).then(|| missing.join("; "))
}

/// The configured endpoint when it is `http://` and plain HTTP is not allowed: the client
/// would refuse every request to it.
fn plain_http_endpoint(b: &AmazonS3Builder) -> Option<String> {
    let allowed = b
        .get_config_value(&AmazonS3ConfigKey::Client(ClientConfigKey::AllowHttp))
        .is_some_and(|v| TRUE.contains(&v.to_ascii_lowercase().as_str()));
    let e = configured_endpoint(b)?;
    let http = e
        .get(..7)
        .is_some_and(|s| s.eq_ignore_ascii_case("http://"));
    (http && !allowed).then_some(e)
}

/// The values object_store reads as true.
const TRUE: &[&str] = &["1", "true", "on", "yes", "y"];

/// The endpoint set in the environment, if any (the S3-specific one first).
fn configured_endpoint(b: &AmazonS3Builder) -> Option<String> {
    b.get_config_value(&AmazonS3ConfigKey::S3Endpoint)
        .or_else(|| b.get_config_value(&AmazonS3ConfigKey::Endpoint))
        .filter(|e| !e.is_empty())
}

/// The server the client will talk to, as shown in errors (credentials in it redacted).
fn endpoint(b: &AmazonS3Builder, bucket: &str) -> String {
    match configured_endpoint(b) {
        Some(e) => redacted(&e),
        None => {
            let region = b
                .get_config_value(&AmazonS3ConfigKey::Region)
                .unwrap_or_else(|| "us-east-1".to_string());
            format!("https://{bucket}.s3.{region}.amazonaws.com")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn builder(settings: &[(AmazonS3ConfigKey, &str)]) -> AmazonS3Builder {
        settings
            .iter()
            .fold(AmazonS3Builder::new(), |b, (k, v)| b.with_config(*k, *v))
    }

    #[test]
    fn names_the_variables_that_are_missing() {
        use AmazonS3ConfigKey::*;
        let none = missing_settings(&builder(&[])).unwrap();
        assert!(
            none.contains("AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY")
                && none.contains("AWS_ENDPOINT_URL")
                && none.contains("AWS_REGION"),
            "{none}"
        );
        let half = missing_settings(&builder(&[(AccessKeyId, "k"), (Region, "eu-west-1")]));
        assert_eq!(
            half.as_deref(),
            Some("AWS_ACCESS_KEY_ID is set but AWS_SECRET_ACCESS_KEY is not")
        );
        let keys_only = missing_settings(&builder(&[(AccessKeyId, "k"), (SecretAccessKey, "s")]));
        assert!(keys_only.unwrap().starts_with("no server"));
        for enough in [
            builder(&[(AccessKeyId, "k"), (SecretAccessKey, "s"), (Region, "r")]),
            builder(&[
                (SkipSignature, "true"),
                (Endpoint, "http://x"),
                (Client(ClientConfigKey::AllowHttp), "true"),
            ]),
            builder(&[(MetadataEndpoint, "http://m"), (S3Endpoint, "https://x")]),
        ] {
            assert_eq!(missing_settings(&enough), None);
        }
    }

    #[test]
    fn a_plain_http_endpoint_needs_allow_http() {
        use AmazonS3ConfigKey::*;
        let keys = [(AccessKeyId, "k"), (SecretAccessKey, "s")];
        let with = |extra: &[(AmazonS3ConfigKey, &str)]| {
            missing_settings(&builder(&[&keys[..], extra].concat()))
        };
        let refused = with(&[(Endpoint, "http://minio:9000")]).unwrap();
        assert!(
            refused.contains("AWS_ALLOW_HTTP=true") && refused.contains("http://minio:9000"),
            "{refused}"
        );
        let s3_endpoint = with(&[(S3Endpoint, "HTTP://minio:9000")]);
        assert!(s3_endpoint.unwrap().contains("AWS_ALLOW_HTTP=true"));
        let allow = Client(ClientConfigKey::AllowHttp);
        for enough in [
            with(&[(Endpoint, "http://minio:9000"), (allow, "true")]),
            with(&[(Endpoint, "http://minio:9000"), (allow, "Yes")]),
            with(&[(Endpoint, "https://minio:9000")]),
            with(&[(Region, "eu-west-1")]),
        ] {
            assert_eq!(enough, None);
        }
        let off = with(&[(Endpoint, "http://minio:9000"), (allow, "false")]);
        assert!(off.unwrap().contains("AWS_ALLOW_HTTP=true"));
    }

    #[test]
    fn shows_the_endpoint_without_credentials() {
        use AmazonS3ConfigKey::*;
        let b = builder(&[(Endpoint, "http://user:pw@minio:9000")]);
        assert_eq!(endpoint(&b, "b"), "http://***@minio:9000");
        let b = builder(&[(Region, "eu-west-1")]);
        assert_eq!(endpoint(&b, "b"), "https://b.s3.eu-west-1.amazonaws.com");
    }
}
