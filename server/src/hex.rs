//! Lowercase hexadecimal, as signature headers carry bytes (webhook and RPC signatures).

/// `bytes` as lowercase hex.
pub fn encode(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The bytes of hex `text`; `None` when it is not an even number of hex digits.
pub fn decode(text: &str) -> Option<Vec<u8>> {
    if !text.len().is_multiple_of(2) {
        return None;
    }
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(text.get(i..i + 2)?, 16).ok())
        .collect()
}

#[cfg(test)]
mod tests {
    #[test]
    fn hex_round_trips_and_refuses_odd_or_non_hex_text() {
        assert_eq!(super::encode(&[0, 171, 255]), "00abff");
        assert_eq!(super::decode("00abff"), Some(vec![0, 171, 255]));
        assert_eq!(super::decode("abc"), None);
        assert_eq!(super::decode("zz"), None);
    }
}
