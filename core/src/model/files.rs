//! Files the model reads: stored files attached to messages, sent in each provider's format.
//!
//! A message names a stored file by a [`FileRef`] without its bytes. Before a request,
//! [`WithFiles`] reads each such file from a [`FileSource`] (the server's object store checked
//! against the Turn's member, or the in-memory Client's files), checks that the provider takes
//! it ([`check_file`]: the type and size table below) and inlines it as a `data:` URL, which
//! each provider's request body then sends in its own format:
//!
//! | provider | images (PNG, JPEG, GIF, WebP) | PDF documents |
//! |---|---|---|
//! | OpenAI Chat Completions | `image_url` part, at most 20 MiB | `file` part (`file_data`), at most 32 MiB |
//! | OpenAI Responses | `input_image`, at most 20 MiB | `input_file` (`file_data`), at most 32 MiB |
//! | Anthropic Messages | `image` block, base64 source, at most 5 MiB | `document` block, base64 source, at most 32 MiB |
//!
//! Any other type, or a larger file, is refused with a message that says which file and why.

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use async_trait::async_trait;
use base64::Engine as _;
use openbot_schema::{ContentPart, FileId, FileRef, Message, ToolResult};

use super::{Model, ModelError, ModelRequest, ModelStream};
use crate::model::transport::{file_placeholder, parts_text};

/// The wire format whose file rules apply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileFormat {
    /// OpenAI Chat Completions (and compatible endpoints).
    OpenAiChat,
    /// The OpenAI Responses API.
    OpenAiResponses,
    /// The Anthropic Messages API.
    Anthropic,
}

/// What a provider takes a file as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileKind {
    /// An image.
    Image,
    /// A PDF document.
    Pdf,
}

const MIB: u64 = 1024 * 1024;
const IMAGE_TYPES: [&str; 4] = ["image/png", "image/jpeg", "image/gif", "image/webp"];

/// Which format a model spec's provider speaks (`openai:`, `compatible:`, `anthropic:`...);
/// `None` for a provider that reads no files (the scripted model).
pub fn file_format_of(spec: &str) -> Option<FileFormat> {
    match super::ModelSpec::parse(spec).ok()? {
        super::ModelSpec::OpenAi { .. } | super::ModelSpec::Compatible { .. } => {
            Some(FileFormat::OpenAiChat)
        }
        super::ModelSpec::OpenAiResponses { .. } => Some(FileFormat::OpenAiResponses),
        super::ModelSpec::Anthropic { .. } => Some(FileFormat::Anthropic),
        super::ModelSpec::Scripted { .. } => None,
    }
}

/// Whether `format` takes a file of `media_type` and `size` bytes, and as what; the refusal
/// says why not (shown to the caller).
pub fn check_file(
    format: FileFormat,
    name: &str,
    media_type: &str,
    size: u64,
) -> Result<FileKind, String> {
    let media_type = media_type.split(';').next().unwrap_or_default().trim();
    let (kind, limit) = if IMAGE_TYPES.contains(&media_type) {
        let limit = match format {
            FileFormat::Anthropic => 5 * MIB,
            FileFormat::OpenAiChat | FileFormat::OpenAiResponses => 20 * MIB,
        };
        (FileKind::Image, limit)
    } else if media_type == "application/pdf" {
        (FileKind::Pdf, 32 * MIB)
    } else {
        return Err(format!(
            "the model cannot read the file `{name}` ({media_type}): it reads PNG, JPEG, GIF and WebP images and PDF documents"
        ));
    };
    if size > limit {
        return Err(format!(
            "the file `{name}` is {size} bytes; the model reads {} of at most {} MiB",
            match kind {
                FileKind::Image => "images",
                FileKind::Pdf => "PDF documents",
            },
            limit / MIB
        ));
    }
    Ok(kind)
}

/// Checks a file a message attaches as the message is sent, from the stored description of
/// the file it names (both hosts check attachments with this): a provider of `format` (`None`:
/// one that reads no files) must take its stored type and size, and `file` is set from the
/// description (media type and name) without a URL, so the model reads the stored bytes, never
/// a URL or type the caller gave. The refusal says which file and why.
pub fn attach_stored(
    format: Option<FileFormat>,
    file: &mut FileRef,
    name: &str,
    media_type: &str,
    size: u64,
) -> Result<(), String> {
    if let Some(format) = format {
        check_file(format, name, media_type, size)?;
    }
    file.media_type = media_type.to_string();
    file.name = Some(name.to_string());
    file.url = None;
    Ok(())
}

/// A stored file's bytes, as a [`FileSource`] reads them.
#[derive(Debug, Clone)]
pub struct FileBytes {
    /// Its media type.
    pub media_type: String,
    /// Its bytes.
    pub bytes: bytes::Bytes,
}

/// Why a file could not be read for a model request.
#[derive(Debug, Clone, thiserror::Error)]
pub enum FileReadError {
    /// Not stored, or not the reader's.
    #[error("file {0} is not stored, or not readable by this Turn's member")]
    NotFound(FileId),
    /// The store failed.
    #[error("file {id} could not be read: {cause}")]
    Failed {
        /// The file.
        id: FileId,
        /// What failed.
        cause: String,
    },
}

/// Where a Turn's files are read: it answers only the files its reader may read.
#[async_trait]
pub trait FileSource: Send + Sync {
    /// The bytes of a file.
    async fn read(&self, id: FileId) -> Result<FileBytes, FileReadError>;
}

/// A model that reads the files its messages attach: each file reference without a URL is
/// read from `source`, checked against the provider's rules and inlined as a `data:` URL
/// (kept for the Turn's next requests, so a file is read once).
pub struct WithFiles {
    inner: Arc<dyn Model>,
    source: Arc<dyn FileSource>,
    format: FileFormat,
    read: Mutex<HashMap<FileId, String>>,
}

impl WithFiles {
    /// `inner`, reading files from `source` by `format`'s rules.
    pub fn new(inner: Arc<dyn Model>, source: Arc<dyn FileSource>, format: FileFormat) -> Self {
        Self {
            inner,
            source,
            format,
            read: Mutex::new(HashMap::new()),
        }
    }

    /// `inner` with files read from `source` when its spec names a provider that reads files;
    /// else `inner` as it is.
    pub fn wrap(spec: &str, inner: Arc<dyn Model>, source: Arc<dyn FileSource>) -> Arc<dyn Model> {
        match file_format_of(spec) {
            Some(format) => Arc::new(Self::new(inner, source, format)),
            None => inner,
        }
    }

    /// The `data:` URL of a stored file: `Refused` when it is not readable by the Turn (not
    /// stored, not its member's) or the provider does not take it, `Failed` when the store
    /// failed (the request may be tried again).
    async fn data_url(&self, file: &FileRef) -> Result<String, Unread> {
        if let Some(url) = self
            .read
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&file.id)
        {
            return Ok(url.clone());
        }
        let read = self.source.read(file.id).await.map_err(|e| match e {
            FileReadError::NotFound(_) => Unread::Refused(e.to_string()),
            FileReadError::Failed { .. } => Unread::Failed(e.to_string()),
        })?;
        let name = file.name.clone().unwrap_or_else(|| file.id.to_string());
        // The stored media type decides, not the one the message claims.
        check_file(
            self.format,
            &name,
            &read.media_type,
            read.bytes.len() as u64,
        )
        .map_err(Unread::Refused)?;
        let url = format!(
            "data:{};base64,{}",
            read.media_type,
            base64::engine::general_purpose::STANDARD.encode(&read.bytes)
        );
        self.read
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(file.id, url.clone());
        Ok(url)
    }

    /// `message` with its stored files inlined, or `None` when it names none to read. A user
    /// message's file that cannot be read fails the request (the caller attached it); a tool
    /// result's file the Turn cannot read or the provider does not take reaches the model as a
    /// text saying why, so the model can go on.
    async fn inlined(&self, message: &Message) -> Result<Option<Message>, ModelError> {
        let content = match message {
            Message::User { content } => content,
            Message::Tool { result } => &result.output,
            Message::Assistant { .. } => return Ok(None),
        };
        if !content
            .iter()
            .any(|part| matches!(part, ContentPart::File { file } if file.url.is_none()))
        {
            return Ok(None);
        }
        let from_tool = matches!(message, Message::Tool { .. });
        let mut parts = Vec::with_capacity(content.len());
        for part in content {
            match part {
                ContentPart::File { file } if file.url.is_none() => {
                    match self.data_url(file).await {
                        Ok(url) => {
                            let mut file = file.clone();
                            file.url = Some(url);
                            parts.push(ContentPart::File { file });
                        }
                        Err(Unread::Refused(why)) if from_tool => parts.push(ContentPart::text(
                            format!("{} not sent: {why}", file_placeholder(file)),
                        )),
                        Err(Unread::Refused(why) | Unread::Failed(why)) => {
                            return Err(ModelError::File(why));
                        }
                    }
                }
                other => parts.push(other.clone()),
            }
        }
        Ok(Some(match message {
            Message::Tool { result } => Message::Tool {
                result: ToolResult {
                    output: parts,
                    ..result.clone()
                },
            },
            _ => Message::User { content: parts },
        }))
    }
}

/// Why a stored file was not inlined.
enum Unread {
    /// It is not the Turn's to read, or the provider does not take it.
    Refused(String),
    /// The store failed.
    Failed(String),
}

#[async_trait]
impl Model for WithFiles {
    fn name(&self) -> &str {
        self.inner.name()
    }

    fn context_window(&self) -> u32 {
        self.inner.context_window()
    }

    async fn stream(&self, mut request: ModelRequest) -> Result<ModelStream, ModelError> {
        for message in &mut request.messages {
            if let Some(inlined) = self.inlined(message).await? {
                *message = Arc::new(inlined);
            }
        }
        self.inner.stream(request).await
    }
}

/// A `data:` URL's media type and base64 data.
pub(crate) fn data_parts(url: &str) -> Option<(&str, &str)> {
    url.strip_prefix("data:")?.split_once(";base64,")
}

/// How a file part goes to a provider: an image by URL (`data:` or `https:`), a PDF by its
/// data or URL, or (a file that was not read: no URL, or a type no provider takes) a text
/// placeholder.
pub(crate) enum Attachment<'a> {
    /// An image at this URL.
    Image(&'a str),
    /// A PDF in a `data:` URL.
    PdfData,
    /// A PDF at this `https:` URL.
    PdfUrl(&'a str),
    /// Not sendable: the placeholder stands for it.
    Placeholder,
}

/// How `file` is sent.
pub(crate) fn attachment(file: &FileRef) -> Attachment<'_> {
    let Some(url) = file.url.as_deref() else {
        return Attachment::Placeholder;
    };
    let media_type = file.media_type.split(';').next().unwrap_or_default().trim();
    if media_type.starts_with("image/") {
        return Attachment::Image(url);
    }
    if media_type == "application/pdf" {
        return match data_parts(url) {
            Some(_) => Attachment::PdfData,
            None if url.starts_with("https://") => Attachment::PdfUrl(url),
            None => Attachment::Placeholder,
        };
    }
    Attachment::Placeholder
}

/// How a file or media part goes to a provider of one format.
pub(crate) enum Outgoing<'a> {
    /// An image at this URL (`data:` or `https:`).
    Image(Cow<'a, str>),
    /// A PDF document as a `data:` URL, with a file name.
    Pdf {
        /// `data:application/pdf;base64,...`.
        url: Cow<'a, str>,
        /// Its name.
        filename: String,
    },
    /// A PDF at this `https:` URL.
    PdfUrl(&'a str),
    /// Not sendable: this text stands for it.
    Text(String),
}

impl Outgoing<'_> {
    /// Whether it is a file the provider reads (not a text standing for one).
    pub(crate) fn is_file(&self) -> bool {
        !matches!(self, Outgoing::Text(_))
    }
}

/// How `part` goes to a provider of `format`: `None` for text. A stored file goes as
/// [`WithFiles`] inlined it (a placeholder when it was not read); a media part goes inline when
/// the provider takes its type and size ([`check_file`]), else as a text saying why not.
pub(crate) fn outgoing(part: &ContentPart, format: FileFormat) -> Option<Outgoing<'_>> {
    match part {
        ContentPart::Text { .. } => None,
        ContentPart::File { file } => Some(match attachment(file) {
            Attachment::Image(url) => Outgoing::Image(Cow::Borrowed(url)),
            Attachment::PdfData => Outgoing::Pdf {
                url: Cow::Borrowed(file.url.as_deref().unwrap_or_default()),
                filename: file
                    .name
                    .clone()
                    .unwrap_or_else(|| format!("{}.pdf", file.id)),
            },
            Attachment::PdfUrl(url) => Outgoing::PdfUrl(url),
            Attachment::Placeholder => Outgoing::Text(file_placeholder(file)),
        }),
        ContentPart::Media {
            media_type,
            data,
            name,
        } => {
            let media_type = media_type.split(';').next().unwrap_or_default().trim();
            let name = name.as_deref().unwrap_or("media");
            let Some(size) = base64_size(data) else {
                return Some(Outgoing::Text(format!(
                    "[file: {name} ({media_type}) not sent: its data is not base64]"
                )));
            };
            Some(match check_file(format, name, media_type, size) {
                Ok(FileKind::Image) => {
                    Outgoing::Image(Cow::Owned(format!("data:{media_type};base64,{data}")))
                }
                Ok(FileKind::Pdf) => Outgoing::Pdf {
                    url: Cow::Owned(format!("data:application/pdf;base64,{data}")),
                    filename: name.rsplit('/').next().unwrap_or(name).to_string(),
                },
                Err(refusal) => {
                    Outgoing::Text(format!("[file: {name} ({media_type}) not sent: {refusal}]"))
                }
            })
        }
    }
}

/// A tool result as one text for a provider of `format`: its texts, each file it carries as a
/// placeholder (or, when the provider cannot read it, the text saying why), joined by
/// newlines; prefixed with `Error: ` when it failed and `mark_errors` asks for it.
pub(crate) fn result_text(result: &ToolResult, format: FileFormat, mark_errors: bool) -> String {
    let texts: Vec<String> = result
        .output
        .iter()
        .map(|part| match outgoing(part, format) {
            Some(Outgoing::Text(text)) => text,
            _ => parts_text(std::slice::from_ref(part)),
        })
        .collect();
    let text = texts.join("\n");
    if mark_errors && result.is_error {
        format!("Error: {text}")
    } else {
        text
    }
}

/// The decoded size of padded standard base64 `data`, or `None` when it is not that.
fn base64_size(data: &str) -> Option<u64> {
    let bytes = data.as_bytes();
    if !bytes.len().is_multiple_of(4) {
        return None;
    }
    let padding = bytes.iter().rev().take_while(|&&b| b == b'=').count();
    let body = &bytes[..bytes.len() - padding];
    if padding > 2
        || !body
            .iter()
            .all(|&b| b.is_ascii_alphanumeric() || b == b'+' || b == b'/')
    {
        return None;
    }
    Some((bytes.len() / 4 * 3 - padding) as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_provider_takes_images_and_pdfs_within_its_sizes() {
        assert_eq!(
            check_file(FileFormat::OpenAiChat, "a.png", "image/png", 6 * MIB),
            Ok(FileKind::Image)
        );
        assert!(check_file(FileFormat::Anthropic, "a.png", "image/png", 6 * MIB).is_err());
        assert_eq!(
            check_file(FileFormat::Anthropic, "a.pdf", "application/pdf", MIB),
            Ok(FileKind::Pdf)
        );
        let refused =
            check_file(FileFormat::OpenAiResponses, "a.zip", "application/zip", 1).unwrap_err();
        assert!(refused.contains("`a.zip` (application/zip)"), "{refused}");
    }

    #[test]
    fn a_media_part_the_provider_cannot_take_is_a_text_saying_why() {
        let text = |part: &ContentPart, format| match outgoing(part, format) {
            Some(Outgoing::Text(text)) => text,
            _ => panic!("sent as a file"),
        };
        let not_base64 = ContentPart::media("image/png", "not base64!");
        assert!(text(&not_base64, FileFormat::Anthropic).contains("not base64"));
        let big = ContentPart::media("image/png", "A".repeat(8 * 1024 * 1024));
        assert!(text(&big, FileFormat::Anthropic).contains("at most 5 MiB"));
        assert!(matches!(
            outgoing(&big, FileFormat::OpenAiChat),
            Some(Outgoing::Image(_))
        ));
        assert_eq!(base64_size("iVBORw0KGgo="), Some(8));
        assert_eq!(base64_size("JVBERi0xLjcgZG9jdW1lbnQ="), Some(17));
    }

    #[test]
    fn a_spec_names_its_file_format() {
        assert_eq!(
            file_format_of("openai:gpt-4o"),
            Some(FileFormat::OpenAiChat)
        );
        assert_eq!(
            file_format_of("anthropic:claude"),
            Some(FileFormat::Anthropic)
        );
        assert_eq!(
            file_format_of("compatible:http://127.0.0.1:1/v1:m"),
            Some(FileFormat::OpenAiChat)
        );
        assert_eq!(file_format_of("scripted:x"), None);
    }
}
