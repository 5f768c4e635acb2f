//! Ranking: keyword relevance (BM25 over the candidates) and cosine similarity of embeddings.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::turn::estimate_text;

/// The words of a text as ranking sees them: lower case, letters and digits, two characters
/// or more.
pub fn terms(text: &str) -> Vec<String> {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|w| w.chars().count() >= 2)
        .map(str::to_lowercase)
        .collect()
}

/// What keyword ranking needs of one text, without its words: how many terms it has, its
/// estimated tokens, and how often each term occurs, each term as the first 8 bytes of its
/// SHA-256. A server seals it beside the content, so ranking a candidate never opens the
/// content itself; only the memories that are selected are opened.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TermDigest {
    /// The number of terms ([`terms`]) of the text.
    pub length: u32,
    /// The text's estimated tokens as a recalled memory takes them.
    pub tokens: u64,
    /// Each term's hash and how often it occurs.
    pub counts: BTreeMap<u64, u32>,
}

impl TermDigest {
    /// The digest of `text`.
    pub fn of(text: &str) -> Self {
        let words = terms(text);
        let mut counts = BTreeMap::new();
        for word in &words {
            *counts.entry(term_hash(word)).or_default() += 1;
        }
        Self {
            length: u32::try_from(words.len()).unwrap_or(u32::MAX),
            tokens: estimate_text(text) + 4,
            counts,
        }
    }
}

/// A term as a digest keeps it.
pub fn term_hash(term: &str) -> u64 {
    let digest = Sha256::digest(term.as_bytes());
    let mut first = [0u8; 8];
    first.copy_from_slice(&digest[..8]);
    u64::from_le_bytes(first)
}

/// The BM25 score of each document for `query` (k1 = 1.2, b = 0.75), with the document
/// frequencies of the candidates themselves: a word every candidate has counts little.
/// A document with no query word scores 0.
pub fn keyword_scores(query: &str, documents: &[&str]) -> Vec<f64> {
    let digests: Vec<TermDigest> = documents.iter().map(|d| TermDigest::of(d)).collect();
    digest_scores(query, &digests.iter().collect::<Vec<_>>())
}

/// [`keyword_scores`] over the documents' digests.
pub fn digest_scores(query: &str, documents: &[&TermDigest]) -> Vec<f64> {
    const K1: f64 = 1.2;
    const B: f64 = 0.75;
    let query: BTreeSet<u64> = terms(query).iter().map(|t| term_hash(t)).collect();
    if query.is_empty() || documents.is_empty() {
        return vec![0.0; documents.len()];
    }
    let n = documents.len() as f64;
    let average = documents.iter().map(|d| f64::from(d.length)).sum::<f64>() / n;
    let mut frequency: HashMap<u64, f64> = HashMap::new();
    for doc in documents {
        for word in query.iter().filter(|w| doc.counts.contains_key(w)) {
            *frequency.entry(*word).or_default() += 1.0;
        }
    }
    documents
        .iter()
        .map(|doc| {
            let length = f64::from(doc.length);
            query
                .iter()
                .filter_map(|word| doc.counts.get(word).map(|tf| (word, f64::from(*tf))))
                .map(|(word, tf)| {
                    let df = frequency.get(word).copied().unwrap_or(0.0);
                    let idf = ((n - df + 0.5) / (df + 0.5) + 1.0).ln();
                    let norm = if average > 0.0 { length / average } else { 1.0 };
                    idf * tf * (K1 + 1.0) / (tf + K1 * (1.0 - B + B * norm))
                })
                .sum()
        })
        .collect()
}

/// The cosine similarity of two vectors; 0 when their lengths differ or one is all zeros.
pub fn cosine(a: &[f32], b: &[f32]) -> f64 {
    if a.len() != b.len() || a.is_empty() {
        return 0.0;
    }
    let (mut dot, mut na, mut nb) = (0.0f64, 0.0f64, 0.0f64);
    for (x, y) in a.iter().zip(b) {
        let (x, y) = (f64::from(*x), f64::from(*y));
        dot += x * y;
        na += x * x;
        nb += y * y;
    }
    if na == 0.0 || nb == 0.0 {
        return 0.0;
    }
    dot / (na.sqrt() * nb.sqrt())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_document_with_the_query_words_ranks_above_one_without() {
        let scores = keyword_scores(
            "favourite colour",
            &[
                "the user's favourite colour is green",
                "the user lives in Oslo",
            ],
        );
        assert!(scores[0] > 0.0);
        assert_eq!(scores[1], 0.0);
    }

    #[test]
    fn a_digest_ranks_as_its_text_does_and_keeps_no_word() {
        let texts = [
            "the cat sat on the mat",
            "a dog and a cat",
            "nothing of the kind",
        ];
        let digests: Vec<TermDigest> = texts.iter().map(|t| TermDigest::of(t)).collect();
        assert_eq!(
            digest_scores("cat mat", &digests.iter().collect::<Vec<_>>()),
            keyword_scores("cat mat", &texts)
        );
        let kept = serde_json::to_string(&digests[0]).unwrap();
        assert!(!kept.contains("cat") && !kept.contains("mat"), "{kept}");
        assert_eq!(digests[0].counts.get(&term_hash("the")), Some(&2));
    }

    #[test]
    fn cosine_of_a_vector_with_itself_is_one_and_with_another_length_zero() {
        let v = [0.5f32, 0.25, -1.0];
        assert!((cosine(&v, &v) - 1.0).abs() < 1e-9);
        assert_eq!(cosine(&v, &[1.0, 2.0]), 0.0);
    }
}
