//! The names the model sees: `mcp__<server>__<tool>` with every character other than an ASCII
//! letter, digit or `_` replaced by `_` (providers accept little else), at most 64 characters.
//! Names that collide after that, and names that had to be shortened, get `_` and eight hex
//! digits of a hash of the server and tool names: the same tools always get the same names.

use std::collections::{HashMap, HashSet};

/// The longest tool name providers accept (OpenAI's limit).
pub const MAX_LEN: usize = 64;

/// One name per tool, in the shape of `servers` (server name, its tools' names), in order.
pub fn assign(servers: &[(&str, Vec<&str>)]) -> Vec<Vec<String>> {
    let bases: Vec<Vec<String>> = servers
        .iter()
        .map(|(server, tools)| {
            tools
                .iter()
                .map(|tool| sanitize(&format!("mcp__{server}__{tool}")))
                .collect()
        })
        .collect();
    let mut counts: HashMap<&str, usize> = HashMap::new();
    for name in bases.iter().flatten() {
        *counts.entry(name.as_str()).or_default() += 1;
    }
    let mut used: HashSet<String> = HashSet::new();
    let mut out = Vec::with_capacity(servers.len());
    for ((server, tools), bases) in servers.iter().zip(&bases) {
        let mut names = Vec::with_capacity(tools.len());
        for (tool, base) in tools.iter().zip(bases) {
            let mut name = if counts[base.as_str()] > 1 || base.len() > MAX_LEN {
                with_suffix(base, &format!("_{:08x}", hash(server, tool)))
            } else {
                base.clone()
            };
            // Only a hash collision gets here; the first comer keeps the name.
            let mut n = 2;
            while used.contains(&name) {
                name = with_suffix(base, &format!("_{:08x}_{n}", hash(server, tool)));
                n += 1;
            }
            used.insert(name.clone());
            names.push(name);
        }
        out.push(names);
    }
    out
}

pub fn sanitize(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// `base` cut to leave room for `suffix` (both ASCII after [`sanitize`]), then `suffix`.
fn with_suffix(base: &str, suffix: &str) -> String {
    let keep = base.len().min(MAX_LEN - suffix.len());
    format!("{}{suffix}", &base[..keep])
}

/// 32-bit FNV-1a: stable across runs and platforms, unlike `std`'s hasher.
fn hash(server: &str, tool: &str) -> u32 {
    let mut h: u32 = 0x811c_9dc5;
    for b in server.bytes().chain([0]).chain(tool.bytes()) {
        h ^= u32::from(b);
        h = h.wrapping_mul(0x0100_0193);
    }
    h
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_prefixed_and_sanitised() {
        let names = assign(&[
            ("fs", vec!["read_file", "list.dir", "grüße"]),
            ("my-srv", vec!["x"]),
        ]);
        assert_eq!(
            names,
            vec![
                vec!["mcp__fs__read_file", "mcp__fs__list_dir", "mcp__fs__gr__e"],
                vec!["mcp__my_srv__x"],
            ]
        );
    }

    #[test]
    fn colliding_names_all_get_a_deterministic_suffix() {
        let servers = [("s", vec!["a.b", "a-b", "c"])];
        let names = assign(&servers);
        assert_eq!(names[0][2], "mcp__s__c");
        assert!(names[0][0].starts_with("mcp__s__a_b_") && names[0][1].starts_with("mcp__s__a_b_"));
        assert_ne!(names[0][0], names[0][1]);
        assert_eq!(names[0][0].len(), "mcp__s__a_b_".len() + 8);
        assert_eq!(assign(&servers), names, "the same tools get the same names");
        // Across servers too: `a` + `b__c` and `a__b` + `c` meet at `mcp__a__b__c`.
        let names = assign(&[("a", vec!["b__c"]), ("a__b", vec!["c"])]);
        assert_ne!(names[0][0], names[1][0]);
        assert!(
            names
                .iter()
                .flatten()
                .all(|n| n.starts_with("mcp__a__b__c_"))
        );
    }

    #[test]
    fn long_names_are_capped_and_stay_distinct() {
        let long_a = "a".repeat(80);
        let long_b = format!("{}b", "a".repeat(79));
        let names = assign(&[("srv", vec![long_a.as_str(), long_b.as_str()])]);
        for name in &names[0] {
            assert_eq!(name.len(), MAX_LEN, "{name}");
            assert!(name.starts_with("mcp__srv__aaaa"));
        }
        assert_ne!(names[0][0], names[0][1]);
        let exact = "t".repeat(MAX_LEN - "mcp__srv__".len());
        assert_eq!(
            assign(&[("srv", vec![exact.as_str()])])[0][0],
            format!("mcp__srv__{exact}"),
            "a name of exactly the limit is kept whole"
        );
    }
}
