//! Selecting memories for a model request: the best-ranked candidates that fit a token budget,
//! and how they join the request (a section appended to the system instructions).

use super::rank::{TermDigest, cosine, digest_scores};

/// The token budget of the memories a Turn recalls before its model requests.
pub const DEFAULT_RECALL_TOKENS: u32 = 1000;

/// A memory that passed the filters (owner, tags, status, rights), as ranking reads it: its
/// content's digest, never its content.
#[derive(Debug, Clone, PartialEq)]
pub struct Candidate {
    /// Its ID.
    pub id: uuid::Uuid,
    /// Its content's digest.
    pub digest: TermDigest,
    /// Its embedding, if it has one from the model that embedded the query.
    pub embedding: Option<Vec<f32>>,
}

/// A selected memory with its score.
#[derive(Debug, Clone, PartialEq)]
pub struct Selected {
    /// Its position in the candidate list.
    pub index: usize,
    /// Keyword score, plus cosine similarity when both it and the query have embeddings.
    pub score: f64,
    /// Its estimated tokens.
    pub tokens: u64,
}

/// Ranks the candidates for `query` (BM25 keyword score normalised to 0-1, plus the cosine
/// similarity of their embeddings to `query_embedding` when given) and takes the best ones
/// whose estimated tokens fit `budget` together, at most `limit`. With no query word and no
/// embedding every candidate scores 0 and the newest come first (the list's order is kept for
/// ties, so callers pass newest first). A candidate too large for what is left is skipped and
/// smaller ones after it may still fit.
pub fn select_within_budget(
    query: &str,
    query_embedding: Option<&[f32]>,
    candidates: &[Candidate],
    budget: u32,
    limit: usize,
) -> Vec<Selected> {
    let digests: Vec<&TermDigest> = candidates.iter().map(|c| &c.digest).collect();
    let keyword = digest_scores(query, &digests);
    let top = keyword.iter().cloned().fold(0.0f64, f64::max);
    let mut ranked: Vec<Selected> = candidates
        .iter()
        .enumerate()
        .map(|(index, candidate)| {
            let mut score = if top > 0.0 { keyword[index] / top } else { 0.0 };
            if let (Some(q), Some(e)) = (query_embedding, candidate.embedding.as_deref()) {
                score += cosine(q, e);
            }
            Selected {
                index,
                score,
                tokens: candidate.digest.tokens,
            }
        })
        .collect();
    // Stable: equal scores keep the callers' order.
    ranked.sort_by(|a, b| b.score.total_cmp(&a.score));
    let mut left = u64::from(budget);
    let mut out = Vec::new();
    for selected in ranked {
        if out.len() >= limit {
            break;
        }
        if selected.tokens <= left {
            left -= selected.tokens;
            out.push(selected);
        }
    }
    out
}

/// The system instructions with the recalled memories appended as their own section, which is
/// how a selection joins a model request (the same on every provider). Unchanged when nothing
/// was selected.
pub fn recall_instructions(instructions: &str, memories: &[(uuid::Uuid, String)]) -> String {
    if memories.is_empty() {
        return instructions.to_string();
    }
    let mut out = String::from(instructions);
    if !out.is_empty() {
        out.push_str("\n\n");
    }
    out.push_str(
        "Memories (what you know from earlier conversations; each may be out of date, and the \
         user's words in this conversation win):\n",
    );
    for (id, content) in memories {
        out.push_str(&format!("- [{id}] {}\n", content.replace('\n', " ")));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn candidate(content: &str) -> Candidate {
        Candidate {
            id: uuid::Uuid::now_v7(),
            digest: TermDigest::of(content),
            embedding: None,
        }
    }

    #[test]
    fn the_selection_stays_within_the_budget_and_prefers_matching_memories() {
        let long = "filler words ".repeat(200);
        let candidates = vec![
            candidate(&long),
            candidate("the user's favourite colour is green"),
            candidate("the user lives in Oslo"),
        ];
        let budget = 40;
        let selected = select_within_budget("what colour", None, &candidates, budget, 10);
        assert_eq!(selected[0].index, 1);
        assert!(selected.iter().map(|s| s.tokens).sum::<u64>() <= u64::from(budget));
        assert!(selected.iter().all(|s| s.index != 0));
    }
}
