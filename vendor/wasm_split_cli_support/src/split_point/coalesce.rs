//! Skillgate's patch (VENDORED.md): merges small chunks so that a split needs fewer modules.
//!
//! The splitter gives every distinct set of splits that share code a chunk of its own. With a
//! few dozen splits that is hundreds of chunks, most of them a few hundred bytes, and a split
//! needs every chunk whose set names it: the Skillgate console's role editor needed 170
//! modules. A browser pays a request, a compilation and an instantiation for each, which
//! outweighs a few hundred bytes it did not need.
//!
//! Merging chunk A into chunk B gives one chunk needed by the union of their sets. That stays
//! correct: every split that needed either now loads both, and a chunk only puts functions
//! into table slots and data at addresses that are fixed for the whole program, so loading
//! code a split never calls changes nothing. What it costs is bytes: each split in one set
//! but not the other downloads the other's code as well. The merge below keeps that cost low.

use std::collections::{BTreeSet, HashMap};

use super::{OutputModuleInfo, SplitModuleIdentifier};
use crate::dep_graph::DepNode;
use crate::read::{InputModule, SymbolIndex};

/// A chunk while merging: the splits that need it, its estimated size, and what it holds.
#[derive(Debug)]
struct Chunk<T> {
    needed_by: BTreeSet<String>,
    bytes: u64,
    contents: Vec<T>,
}

impl<T> Chunk<T> {
    /// The bytes splits would download without needing them if `self` and `other` were one.
    fn waste_with(&self, other: &Chunk<T>) -> u64 {
        let only_other = other.needed_by.difference(&self.needed_by).count() as u64;
        let only_self = self.needed_by.difference(&other.needed_by).count() as u64;
        self.bytes * only_other + other.bytes * only_self
    }

    fn absorb(&mut self, other: Chunk<T>) {
        self.needed_by.extend(other.needed_by);
        self.bytes += other.bytes;
        self.contents.extend(other.contents);
    }
}

/// While the smallest chunk is under `min_bytes`, merges it with the chunk that wastes the
/// fewest bytes (ties: the smaller partner, then the first set in order, so the output does
/// not depend on hash order). A merge whose union is the set of another chunk folds that one
/// in too: one set, one module.
fn coalesce<T>(mut chunks: Vec<Chunk<T>>, min_bytes: u64) -> Vec<Chunk<T>> {
    loop {
        chunks.sort_by(|a, b| (a.bytes, &a.needed_by).cmp(&(b.bytes, &b.needed_by)));
        if chunks.len() < 2 || chunks[0].bytes >= min_bytes {
            return chunks;
        }
        let smallest = chunks.remove(0);
        let partner = (0..chunks.len())
            .min_by_key(|&i| (smallest.waste_with(&chunks[i]), chunks[i].bytes, i))
            .expect("at least one other chunk");
        let mut merged = chunks.remove(partner);
        merged.absorb(smallest);
        if let Some(same) = chunks.iter().position(|c| c.needed_by == merged.needed_by) {
            let same = chunks.remove(same);
            merged.absorb(same);
        }
        chunks.push(merged);
    }
}

/// Merges the chunks of `modules` (the painted output modules) estimated under `min_bytes`.
/// The main module and the splits are left as they are.
pub(super) fn merge_small_chunks(
    modules: &mut HashMap<SplitModuleIdentifier, OutputModuleInfo>,
    input: &InputModule,
    min_bytes: u64,
) {
    let data_bytes: HashMap<SymbolIndex, u64> = input
        .reloc_info
        .data_symbols
        .iter()
        .map(|symbol| (symbol.symbol_index, symbol.range.end - symbol.range.start))
        .collect();
    let estimate = |node: &DepNode| match *node {
        DepNode::Function(id) => id
            .checked_sub(input.imported_funcs.len())
            .map_or(0, |defined| {
                let body = input.defined_funcs[defined].body.range();
                body.end - body.start
            }),
        DepNode::DataSymbol(symbol) => data_bytes.get(&symbol).copied().unwrap_or(0),
        _ => 0,
    };

    let chunk_ids: Vec<SplitModuleIdentifier> = modules
        .keys()
        .filter(|id| matches!(id, SplitModuleIdentifier::Chunk(_)))
        .cloned()
        .collect();
    let chunks = chunk_ids
        .into_iter()
        .map(|id| {
            let info = modules.remove(&id).expect("a key just listed");
            let SplitModuleIdentifier::Chunk(needed_by) = id else {
                unreachable!("only chunks were listed")
            };
            Chunk {
                needed_by,
                bytes: info.included_symbols.iter().map(estimate).sum(),
                contents: vec![info],
            }
        })
        .collect();
    for chunk in coalesce(chunks, min_bytes) {
        let mut info = OutputModuleInfo::default();
        for part in chunk.contents {
            info.included_symbols.extend(part.included_symbols);
        }
        modules.insert(SplitModuleIdentifier::Chunk(chunk.needed_by), info);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chunk(needed_by: &[&str], bytes: u64) -> Chunk<String> {
        Chunk {
            needed_by: needed_by.iter().map(|s| s.to_string()).collect(),
            bytes,
            contents: vec![format!("{}:{bytes}", needed_by.join("+"))],
        }
    }

    fn sets(chunks: &[Chunk<String>]) -> Vec<(Vec<&str>, u64)> {
        let mut sets: Vec<_> = chunks
            .iter()
            .map(|c| (c.needed_by.iter().map(String::as_str).collect(), c.bytes))
            .collect();
        sets.sort();
        sets
    }

    #[test]
    fn chunks_at_or_over_the_threshold_are_left_alone() {
        let out = coalesce(vec![chunk(&["a", "b"], 100), chunk(&["b", "c"], 200)], 100);
        assert_eq!(sets(&out), [(vec!["a", "b"], 100), (vec!["b", "c"], 200)]);
    }

    #[test]
    fn a_small_chunk_joins_the_partner_that_wastes_the_fewest_bytes() {
        // Into {a,b,c}: c downloads 10 bytes it does not need. Into {a,d}: b downloads 500
        // and d 10. So {a,b,c}, though it is the larger partner.
        let out = coalesce(
            vec![
                chunk(&["a", "b"], 10),
                chunk(&["a", "b", "c"], 1000),
                chunk(&["a", "d"], 500),
            ],
            100,
        );
        assert_eq!(
            sets(&out),
            [(vec!["a", "b", "c"], 1010), (vec!["a", "d"], 500)]
        );
        let merged = out.iter().find(|c| c.bytes == 1010).unwrap();
        assert_eq!(merged.contents.len(), 2, "both chunks' contents are kept");
    }

    #[test]
    fn every_split_still_loads_every_chunk_it_needed() {
        // The first set merges only into supersets; the second into partners that are not
        // (the cheapest partner of {a,b} is {b,c}, so the union must name a as well).
        let cases = [
            vec![
                chunk(&["a", "b"], 5),
                chunk(&["b", "c"], 7),
                chunk(&["c", "d"], 3),
                chunk(&["a", "d"], 9),
                chunk(&["a", "b", "c", "d"], 50),
            ],
            vec![
                chunk(&["a", "b"], 5),
                chunk(&["b", "c"], 30),
                chunk(&["c", "d"], 40),
            ],
        ];
        for before in cases {
            let needs: Vec<(String, BTreeSet<String>)> = before
                .iter()
                .map(|c| (c.contents[0].clone(), c.needed_by.clone()))
                .collect();
            let after = coalesce(before, 20);
            for (content, needed_by) in needs {
                let home = after
                    .iter()
                    .find(|c| c.contents.contains(&content))
                    .expect("no chunk's contents are lost");
                assert!(
                    home.needed_by.is_superset(&needed_by),
                    "{content} moved to a chunk that {needed_by:?} do not all load"
                );
            }
            assert!(after.iter().all(|c| c.bytes >= 20) || after.len() == 1);
        }
    }

    #[test]
    fn a_merge_that_yields_an_existing_set_makes_one_chunk_of_the_two() {
        // Chunks of no estimated size (only tables or globals) tie on waste; the smaller
        // partner wins, and the union {a,b,c} is a chunk already: one module, not two.
        let out = coalesce(
            vec![
                chunk(&["a", "b"], 0),
                chunk(&["b", "c"], 0),
                chunk(&["a", "b", "c"], 5),
            ],
            1,
        );
        assert_eq!(sets(&out), [(vec!["a", "b", "c"], 5)]);
        assert_eq!(out[0].contents.len(), 3);
    }

    #[test]
    fn a_lone_small_chunk_stays_as_it_is() {
        let out = coalesce(vec![chunk(&["a", "b"], 1)], 100);
        assert_eq!(sets(&out), [(vec!["a", "b"], 1)]);
    }
}
