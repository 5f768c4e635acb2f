//! Ranking: keyword relevance (BM25 over the candidates) and cosine similarity of embeddings.

use std::collections::{HashMap, HashSet};

/// The words of a text as ranking sees them: lower case, letters and digits, two characters
/// or more.
pub fn terms(text: &str) -> Vec<String> {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|w| w.chars().count() >= 2)
        .map(str::to_lowercase)
        .collect()
}

/// The BM25 score of each document for `query` (k1 = 1.2, b = 0.75), with the document
/// frequencies of the candidates themselves: a word every candidate has counts little.
/// A document with no query word scores 0.
pub fn keyword_scores(query: &str, documents: &[&str]) -> Vec<f64> {
    const K1: f64 = 1.2;
    const B: f64 = 0.75;
    let query: HashSet<String> = terms(query).into_iter().collect();
    if query.is_empty() || documents.is_empty() {
        return vec![0.0; documents.len()];
    }
    let docs: Vec<Vec<String>> = documents.iter().map(|d| terms(d)).collect();
    let n = docs.len() as f64;
    let average = docs.iter().map(Vec::len).sum::<usize>() as f64 / n;
    let mut frequency: HashMap<&str, f64> = HashMap::new();
    for doc in &docs {
        let unique: HashSet<&str> = doc.iter().map(String::as_str).collect();
        for word in unique {
            if query.contains(word) {
                *frequency.entry(word).or_default() += 1.0;
            }
        }
    }
    docs.iter()
        .map(|doc| {
            let length = doc.len() as f64;
            let mut counts: HashMap<&str, f64> = HashMap::new();
            for word in doc {
                if query.contains(word.as_str()) {
                    *counts.entry(word.as_str()).or_default() += 1.0;
                }
            }
            counts
                .iter()
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
    fn cosine_of_a_vector_with_itself_is_one_and_with_another_length_zero() {
        let v = [0.5f32, 0.25, -1.0];
        assert!((cosine(&v, &v) - 1.0).abs() < 1e-9);
        assert_eq!(cosine(&v, &[1.0, 2.0]), 0.0);
    }
}
