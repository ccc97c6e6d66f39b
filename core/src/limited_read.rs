//! Reading a file an operator or an outsider names (a catalog file, a PEM bundle, a key
//! file) with a size limit that holds before the contents are in memory: the file's length
//! is checked first, and the read itself stops one byte past the limit, so a file that grows
//! while it is read, a FIFO or a device cannot slip past the check. The same for an HTTP
//! answer a remote party sends ([`read_body_limited`]): its declared length first, then the
//! body as it streams in.

use std::fmt;
use std::io::Read;
use std::path::{Path, PathBuf};

#[derive(Debug, thiserror::Error)]
pub enum LimitedReadError {
    #[error("{}", too_big_text(.path, *.size, *.limit, .limit_name))]
    TooBig {
        path: PathBuf,
        /// The length the file reported, if it said it was too big; `None` when the read
        /// went past the limit (a growing file, a pipe).
        size: Option<u64>,
        limit: u64,
        /// What the limit is called and how to raise it, e.g.
        /// "the catalog size limit (--max-catalog-bytes)".
        limit_name: &'static str,
    },
    #[error("reading {}: {source}", .path.display())]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
}

fn too_big_text(path: &Path, size: Option<u64>, limit: u64, limit_name: &str) -> String {
    let size = match size {
        Some(size) => format!("is {size} bytes"),
        None => format!("has more than {limit} bytes"),
    };
    format!(
        "{} {size}, over {limit_name} of {}",
        path.display(),
        Bytes(limit)
    )
}

/// `4194304 (4 MiB)`: the exact figure, and a readable one when it is whole MiB or KiB.
struct Bytes(u64);

impl fmt::Display for Bytes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const KIB: u64 = 1024;
        const MIB: u64 = 1024 * 1024;
        match self.0 {
            n if n >= MIB && n % MIB == 0 => write!(f, "{n} bytes ({} MiB)", n / MIB),
            n if n >= KIB && n % KIB == 0 => write!(f, "{n} bytes ({} KiB)", n / KIB),
            n => write!(f, "{n} bytes"),
        }
    }
}

/// Reads the whole file at `path` if it has at most `limit` bytes; never holds more than
/// `limit + 1` bytes of it.
pub fn read_limited(
    path: &Path,
    limit: u64,
    limit_name: &'static str,
) -> Result<Vec<u8>, LimitedReadError> {
    let io = |source| LimitedReadError::Io {
        path: path.to_path_buf(),
        source,
    };
    let too_big = |size| LimitedReadError::TooBig {
        path: path.to_path_buf(),
        size,
        limit,
        limit_name,
    };
    let file = std::fs::File::open(path).map_err(io)?;
    let length = file.metadata().map_err(io)?.len();
    if length > limit {
        return Err(too_big(Some(length)));
    }
    let mut bytes = Vec::with_capacity(usize::try_from(length).unwrap_or(0));
    file.take(limit.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(io)?;
    if bytes.len() as u64 > limit {
        return Err(too_big(None));
    }
    Ok(bytes)
}

/// [`read_limited`] for a text file: its bytes must be UTF-8.
pub fn read_limited_to_string(
    path: &Path,
    limit: u64,
    limit_name: &'static str,
) -> Result<String, LimitedReadError> {
    let bytes = read_limited(path, limit, limit_name)?;
    String::from_utf8(bytes).map_err(|e| LimitedReadError::Io {
        path: path.to_path_buf(),
        source: std::io::Error::new(std::io::ErrorKind::InvalidData, e.utf8_error()),
    })
}

/// Why an HTTP answer's body was not read.
#[derive(Debug, thiserror::Error)]
pub enum BodyError {
    #[error("the answer is larger than {0} bytes")]
    TooLarge(usize),
    #[error("the answer cannot be read: {0}")]
    Read(#[from] reqwest::Error),
}

/// The body of `response`, refused as soon as it is known to pass `limit` bytes: by its
/// declared length before anything is read, or as the chunks arrive (a length can be
/// absent or false).
pub async fn read_body_limited(
    mut response: reqwest::Response,
    limit: usize,
) -> Result<Vec<u8>, BodyError> {
    if response.content_length().is_some_and(|n| n > limit as u64) {
        return Err(BodyError::TooLarge(limit));
    }
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await? {
        body.extend_from_slice(&chunk);
        if body.len() > limit {
            return Err(BodyError::TooLarge(limit));
        }
    }
    Ok(body)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_within_the_limit_is_read_whole() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        std::fs::write(&path, b"12345").unwrap();
        assert_eq!(read_limited(&path, 5, "the limit").unwrap(), b"12345");
    }

    #[test]
    fn a_file_over_the_limit_is_refused_with_its_size_and_the_limit_named() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        std::fs::write(&path, vec![b'x'; 2048 + 1]).unwrap();
        let error = read_limited(&path, 2048, "the test limit (--test)").unwrap_err();
        let text = error.to_string();
        assert!(text.contains("is 2049 bytes"), "{text}");
        assert!(
            text.contains("over the test limit (--test) of 2048 bytes (2 KiB)"),
            "{text}"
        );
    }

    #[test]
    fn a_source_without_a_length_is_cut_off_one_byte_past_the_limit() {
        // /dev/zero reports length 0 and never ends: only the bounded read stops it.
        let error = read_limited(Path::new("/dev/zero"), 1000, "the limit").unwrap_err();
        assert!(
            matches!(error, LimitedReadError::TooBig { size: None, .. }),
            "{error}"
        );
    }

    /// A body of `len` bytes at `/declared` (with its length) and at `/streamed` (in
    /// chunks, no length), on loopback; its base URL.
    async fn serve_body(len: usize) -> String {
        use axum::body::Body;
        use axum::routing::get;
        let app = axum::Router::new()
            .route("/declared", get(move || async move { vec![b'x'; len] }))
            .route(
                "/streamed",
                get(move || async move {
                    let chunks = vec![b'x'; len]
                        .chunks(1024)
                        .map(|c| Ok::<_, std::io::Error>(c.to_vec()))
                        .collect::<Vec<_>>();
                    Body::from_stream(futures::stream::iter(chunks))
                }),
            );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await });
        base
    }

    #[tokio::test]
    async fn an_answer_past_the_limit_is_refused_whether_its_length_is_declared_or_not() {
        crate::upstream::install_crypto_provider();
        let base = serve_body(10 * 1024).await;
        let client = reqwest::Client::new();
        for path in ["declared", "streamed"] {
            let get = || client.get(format!("{base}/{path}")).send();
            let whole = read_body_limited(get().await.unwrap(), 10 * 1024).await;
            assert_eq!(whole.unwrap().len(), 10 * 1024, "{path}");
            let refused = read_body_limited(get().await.unwrap(), 10 * 1024 - 1).await;
            assert!(
                matches!(refused, Err(BodyError::TooLarge(_))),
                "{path}: {:?}",
                refused.map(|body| body.len())
            );
        }
    }
}
