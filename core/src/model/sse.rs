//! A small, strict parser of server-sent events (the `text/event-stream` format).
//!
//! It follows the WHATWG rules: lines end with CRLF, LF or CR; `data:` lines of one event are
//! joined with `\n`; `event:` names the event; lines starting with `:` are comments; a blank
//! line ends the event; an event without data is dropped; a leading byte-order mark is skipped.
//! Bytes may arrive split anywhere, even inside a UTF-8 character or between CR and LF.
//! It is strict where the rules are loose: text that is not UTF-8 and lines or events larger
//! than [`MAX_EVENT_BYTES`] are errors, never silently repaired. The `[DONE]` marker some
//! providers send is ordinary data here; callers decide what it means.

/// The largest line or event accepted, in bytes. Anything larger is an error, so a broken peer
/// cannot grow memory without bound.
pub(crate) const MAX_EVENT_BYTES: usize = 8 * 1024 * 1024;

/// One dispatched event.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct SseEvent {
    /// The `event:` field, if the event had one.
    pub event: Option<String>,
    /// The `data:` lines joined with `\n`, without a trailing newline.
    pub data: String,
}

impl SseEvent {
    /// The event's name: its `event:` field, or `message` when it had none, as the format says.
    pub fn name(&self) -> &str {
        self.event.as_deref().unwrap_or("message")
    }
}

/// Why a byte stream is not a valid event stream.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum SseError {
    /// A line is not valid UTF-8.
    #[error("an event-stream line is not valid UTF-8")]
    InvalidUtf8,
    /// A line or an event is larger than [`MAX_EVENT_BYTES`].
    #[error("an event-stream line or event is larger than {MAX_EVENT_BYTES} bytes")]
    TooLarge,
}

/// An incremental parser: feed it bytes as they arrive, take the events it completes.
#[derive(Debug, Default)]
pub(crate) struct SseParser {
    /// The bytes of the line being read.
    line: Vec<u8>,
    /// The last byte seen was a CR: an LF right after it belongs to the same line end.
    after_cr: bool,
    /// No line was completed yet (a byte-order mark may still come).
    started: bool,
    /// The `event:` field of the event being read.
    event: Option<String>,
    /// The data of the event being read, each line followed by `\n`.
    data: String,
}

impl SseParser {
    /// A parser at the start of a stream.
    pub fn new() -> Self {
        Self::default()
    }

    /// Reads more bytes and returns the events they complete, in order. After an error the
    /// parser's state is undefined; the stream should be abandoned.
    pub fn push(&mut self, bytes: &[u8]) -> Result<Vec<SseEvent>, SseError> {
        let mut events = Vec::new();
        let mut rest = bytes;
        while !rest.is_empty() {
            if self.after_cr {
                self.after_cr = false;
                if rest[0] == b'\n' {
                    rest = &rest[1..];
                    continue;
                }
            }
            match rest.iter().position(|&b| b == b'\n' || b == b'\r') {
                Some(end) => {
                    self.extend_line(&rest[..end])?;
                    self.after_cr = rest[end] == b'\r';
                    rest = &rest[end + 1..];
                    if let Some(event) = self.end_line()? {
                        events.push(event);
                    }
                }
                None => {
                    self.extend_line(rest)?;
                    rest = &[];
                }
            }
        }
        Ok(events)
    }

    fn extend_line(&mut self, bytes: &[u8]) -> Result<(), SseError> {
        if self.line.len() + bytes.len() > MAX_EVENT_BYTES {
            return Err(SseError::TooLarge);
        }
        self.line.extend_from_slice(bytes);
        Ok(())
    }

    /// Handles the completed line; returns an event when the line was blank and ended one.
    fn end_line(&mut self) -> Result<Option<SseEvent>, SseError> {
        let bytes = std::mem::take(&mut self.line);
        let mut line = String::from_utf8(bytes).map_err(|_| SseError::InvalidUtf8)?;
        if !self.started {
            self.started = true;
            if let Some(stripped) = line.strip_prefix('\u{feff}') {
                line = stripped.to_string();
            }
        }
        if line.is_empty() {
            return Ok(self.dispatch());
        }
        if line.starts_with(':') {
            return Ok(None);
        }
        let (field, value) = match line.split_once(':') {
            Some((field, value)) => (field, value.strip_prefix(' ').unwrap_or(value)),
            None => (line.as_str(), ""),
        };
        if self.data.len() + value.len() >= MAX_EVENT_BYTES {
            return Err(SseError::TooLarge);
        }
        match field {
            "event" => self.event = Some(value.to_string()),
            "data" => {
                self.data.push_str(value);
                self.data.push('\n');
            }
            // `id`, `retry` and unknown fields do not matter to a single request's stream.
            _ => {}
        }
        Ok(None)
    }

    fn dispatch(&mut self) -> Option<SseEvent> {
        let event = self.event.take();
        if self.data.is_empty() {
            return None;
        }
        let mut data = std::mem::take(&mut self.data);
        data.pop();
        Some(SseEvent { event, data })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_all(chunks: &[&[u8]]) -> Vec<SseEvent> {
        let mut parser = SseParser::new();
        chunks
            .iter()
            .flat_map(|chunk| parser.push(chunk).unwrap())
            .collect()
    }

    fn event(name: Option<&str>, data: &str) -> SseEvent {
        SseEvent {
            event: name.map(str::to_string),
            data: data.to_string(),
        }
    }

    #[test]
    fn data_lines_of_one_event_are_joined_with_newlines() {
        let events = parse_all(&[b"data: one\ndata: two\ndata:three\n\n"]);
        assert_eq!(events, vec![event(None, "one\ntwo\nthree")]);
        assert_eq!(events[0].name(), "message");
    }

    #[test]
    fn the_event_field_names_the_event_and_resets_after_it() {
        let events = parse_all(&[b"event: ping\ndata: {}\n\ndata: x\n\n"]);
        assert_eq!(events, vec![event(Some("ping"), "{}"), event(None, "x")]);
        assert_eq!(events[0].name(), "ping");
    }

    #[test]
    fn comments_and_unknown_fields_are_ignored() {
        let events = parse_all(&[b": keep-alive\nid: 7\nretry: 10\nfoo: bar\ndata: x\n\n"]);
        assert_eq!(events, vec![event(None, "x")]);
    }

    #[test]
    fn crlf_and_lone_cr_end_lines() {
        let events = parse_all(&[b"data: a\r\n\r\ndata: b\r\rdata: c\n\n"]);
        assert_eq!(
            events,
            vec![event(None, "a"), event(None, "b"), event(None, "c")]
        );
    }

    #[test]
    fn a_crlf_split_between_chunks_is_one_line_end() {
        let events = parse_all(&[b"data: a\r", b"\n", b"data: b\r", b"\n\r", b"\n"]);
        assert_eq!(events, vec![event(None, "a\nb")]);
    }

    #[test]
    fn chunks_split_at_every_byte_give_the_same_events() {
        let stream =
            "event: delta\r\ndata: {\"t\":\"h\u{e9}llo \u{1f600}\"}\r\n\r\n: c\ndata: [DONE]\n\n";
        let whole = parse_all(&[stream.as_bytes()]);
        let bytes: Vec<&[u8]> = stream.as_bytes().chunks(1).collect();
        assert_eq!(parse_all(&bytes), whole);
        assert_eq!(
            whole,
            vec![
                event(Some("delta"), "{\"t\":\"h\u{e9}llo \u{1f600}\"}"),
                event(None, "[DONE]")
            ]
        );
    }

    #[test]
    fn one_leading_space_is_removed_from_values_and_no_more() {
        let events = parse_all(&[b"data:  two spaces\ndata\n\n"]);
        assert_eq!(events, vec![event(None, " two spaces\n")]);
    }

    #[test]
    fn an_event_without_data_is_not_dispatched() {
        let events = parse_all(&[b"event: empty\n\n\n\ndata: x\n\n"]);
        assert_eq!(events, vec![event(None, "x")]);
    }

    #[test]
    fn an_unfinished_event_at_the_end_is_not_dispatched() {
        let events = parse_all(&[b"data: complete\n\ndata: cut"]);
        assert_eq!(events, vec![event(None, "complete")]);
    }

    #[test]
    fn a_leading_byte_order_mark_is_skipped() {
        let events = parse_all(&[b"\xEF\xBB", b"\xBFdata: x\n\n"]);
        assert_eq!(events, vec![event(None, "x")]);
    }

    #[test]
    fn text_that_is_not_utf8_is_an_error() {
        let mut parser = SseParser::new();
        assert_eq!(
            parser.push(b"data: \xff\xfe\n\n"),
            Err(SseError::InvalidUtf8)
        );
    }

    #[test]
    fn a_line_longer_than_the_limit_is_an_error() {
        let mut parser = SseParser::new();
        let chunk = vec![b'a'; MAX_EVENT_BYTES / 2 + 1];
        assert_eq!(parser.push(&chunk), Ok(Vec::new()));
        assert_eq!(parser.push(&chunk), Err(SseError::TooLarge));
    }
}
