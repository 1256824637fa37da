//! Reading the session tree: the conversation on the current path, and the views Pi's RPC
//! commands return (`get_entries`, `get_tree`, `get_fork_messages`).

use super::{Body, Entry, Session, SessionError, iso_to_ms, user_text};
use crate::protocol::{CompactionSummaryMessage, ForkMessage, Message};
use serde::Serialize;
use std::collections::{HashMap, HashSet};
use std::sync::Arc;

/// What the agent resumes from: the messages on the current path and the settings recorded on
/// it. With a compaction on the path the messages are its summary, the entries from
/// `firstKeptEntryId` up to it, then everything after it (Pi's rule).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Context {
    pub messages: Vec<Arc<Message>>,
    /// `(provider, model id)` from the last `model_change` or assistant message on the path.
    pub model: Option<(String, String)>,
    /// From the last `thinking_level_change` on the path.
    pub thinking_level: Option<String>,
    /// From the last `set_active_tools` entry on the path; `None` keeps the startup tools.
    pub active_tools: Option<Vec<String>>,
    pub name: Option<String>,
}

/// `get_entries` data: the entries after the cursor in file order, and the leaf.
#[derive(Debug, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct EntriesSince<'a> {
    pub entries: &'a [Entry],
    pub leaf_id: Option<&'a str>,
}

/// `get_tree` data. Nesting follows the tree, so serializing a long linear session recurses
/// once per entry: serialize it on a thread with a stack to match.
#[derive(Debug, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct Tree<'a> {
    pub tree: Vec<TreeNode<'a>>,
    pub leaf_id: Option<&'a str>,
}

#[derive(Debug, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct TreeNode<'a> {
    pub entry: &'a Entry,
    pub children: Vec<TreeNode<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub label: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub label_timestamp: Option<&'a str>,
}

impl Drop for TreeNode<'_> {
    // The default drop recurses once per level, which a long session turns into a stack
    // overflow.
    fn drop(&mut self) {
        let mut pending = std::mem::take(&mut self.children);
        while let Some(mut node) = pending.pop() {
            pending.append(&mut node.children);
        }
    }
}

impl Session {
    /// Entry indices from the root to `leaf`, root first.
    pub(super) fn path_to(&self, leaf: Option<usize>) -> Vec<usize> {
        let mut path = Vec::new();
        let mut current = leaf;
        while let Some(i) = current {
            // A parent cycle can only come from a corrupt file; stop rather than loop.
            if path.len() > self.entries.len() {
                break;
            }
            path.push(i);
            current = self.entries[i]
                .parent_id
                .as_ref()
                .and_then(|p| self.index.get(p).copied());
        }
        path.reverse();
        path
    }

    /// The conversation on the current path as entry indices, the compaction (if any) standing
    /// for its summary. With a compaction on the path: its summary, the entries from
    /// `firstKeptEntryId` up to it, then everything after it.
    fn conversation(&self) -> Vec<usize> {
        let path = self.path_to(self.leaf);
        let omitted: HashSet<&str> = path
            .iter()
            .filter_map(|&i| match &self.entries[i].body {
                Body::ContextOmit { target_id } => Some(target_id.as_str()),
                _ => None,
            })
            .collect();
        let is_message = |i: &&usize| {
            let entry = &self.entries[**i];
            matches!(entry.body, Body::Message(_)) && !omitted.contains(entry.id.as_str())
        };
        let compaction = path
            .iter()
            .rposition(|&i| matches!(self.entries[i].body, Body::Compaction { .. }));
        let Some(c) = compaction else {
            return path.iter().filter(is_message).copied().collect();
        };
        let Body::Compaction {
            first_kept_entry_id,
            ..
        } = &self.entries[path[c]].body
        else {
            return Vec::new();
        };
        let kept = path[..c]
            .iter()
            .position(|&i| self.entries[i].id == *first_kept_entry_id)
            .unwrap_or(c);
        let mut out = vec![path[c]];
        out.extend(path[kept..c].iter().filter(is_message));
        out.extend(path[c + 1..].iter().filter(is_message));
        out
    }

    fn conversation_message(&self, i: usize) -> Option<Arc<Message>> {
        let entry = &self.entries[i];
        match &entry.body {
            Body::Message(m) => Some(Arc::clone(m)),
            Body::Compaction {
                summary,
                tokens_before,
                ..
            } => Some(Arc::new(Message::CompactionSummary(
                CompactionSummaryMessage {
                    summary: summary.clone(),
                    tokens_before: *tokens_before,
                    timestamp: iso_to_ms(&entry.timestamp),
                },
            ))),
            _ => None,
        }
    }

    /// The messages of [`Session::context`], each with the id of its entry (the compaction's
    /// id for the summary), e.g. to choose a `firstKeptEntryId`.
    pub fn context_entries(&self) -> Vec<(String, Arc<Message>)> {
        self.conversation()
            .into_iter()
            .filter_map(|i| Some((self.entries[i].id.clone(), self.conversation_message(i)?)))
            .collect()
    }

    /// The entries from the root to the leaf (Pi's `getBranch()`).
    pub fn branch_entries(&self) -> Vec<&Entry> {
        self.path_to(self.leaf)
            .into_iter()
            .map(|i| &self.entries[i])
            .collect()
    }

    /// What the agent needs to resume: see [`Context`].
    pub fn context(&self) -> Context {
        let mut model = None;
        let mut thinking_level = None;
        let mut active_tools = None;
        for i in self.path_to(self.leaf) {
            match &self.entries[i].body {
                Body::ModelChange { provider, model_id } => {
                    model = Some((provider.clone(), model_id.clone()))
                }
                Body::Message(m) => {
                    if let Message::Assistant(a) = &**m {
                        model = Some((a.provider.clone(), a.model.clone()))
                    }
                }
                Body::ThinkingLevelChange { thinking_level: t } => thinking_level = Some(t.clone()),
                Body::ActiveTools { tools } => active_tools = Some(tools.clone()),
                _ => {}
            }
        }
        let order = self.conversation();
        let mut messages = Vec::with_capacity(order.len());
        messages.extend(
            order
                .into_iter()
                .filter_map(|i| self.conversation_message(i)),
        );
        Context {
            messages,
            model,
            thinking_level,
            active_tools,
            name: self.name().map(str::to_owned),
        }
    }

    /// The entries after `cursor` in file order (all of them without one). An unknown cursor
    /// is an error naming it.
    pub fn entries_since(&self, cursor: Option<&str>) -> Result<EntriesSince<'_>, SessionError> {
        let start = match cursor {
            None => 0,
            Some(c) => match self.index.get(c) {
                Some(&i) => i + 1,
                None => return Err(SessionError::EntryNotFound(c.to_owned())),
            },
        };
        Ok(EntriesSince {
            entries: &self.entries[start..],
            leaf_id: self.leaf_id(),
        })
    }

    /// Every entry as a tree: roots are entries without a (known) parent, children oldest
    /// first, labels from `label` entries resolved onto their targets.
    pub fn tree(&self) -> Tree<'_> {
        let mut labels: HashMap<&str, (&str, &str)> = HashMap::new();
        for e in &self.entries {
            // Written this run, or read back from the file.
            let (target, label) = match &e.body {
                Body::Label { target_id, label } => (target_id.as_str(), label.as_deref()),
                Body::Other(raw) if raw.get("type").and_then(|t| t.as_str()) == Some("label") => {
                    let Some(target) = raw.get("targetId").and_then(|t| t.as_str()) else {
                        continue;
                    };
                    (target, raw.get("label").and_then(|l| l.as_str()))
                }
                _ => continue,
            };
            match label {
                Some(l) if !l.is_empty() => labels.insert(target, (l, e.timestamp.as_str())),
                _ => labels.remove(target),
            };
        }

        let n = self.entries.len();
        let mut children: Vec<Vec<usize>> = vec![Vec::new(); n];
        let mut roots = Vec::new();
        for (i, e) in self.entries.iter().enumerate() {
            let parent = e
                .parent_id
                .as_ref()
                .filter(|p| **p != e.id)
                .and_then(|p| self.index.get(p).copied());
            match parent {
                Some(p) => children[p].push(i),
                None => roots.push(i),
            }
        }
        for c in &mut children {
            c.sort_by(|a, b| self.entries[*a].timestamp.cmp(&self.entries[*b].timestamp));
        }

        // Nodes are assembled children first, without recursion: a linear session is as deep
        // as it is long.
        let mut order = Vec::with_capacity(n);
        let mut stack: Vec<usize> = roots.iter().rev().copied().collect();
        while let Some(i) = stack.pop() {
            order.push(i);
            stack.extend(children[i].iter().rev());
        }
        let mut built: Vec<Option<TreeNode<'_>>> = (0..n).map(|_| None).collect();
        for &i in order.iter().rev() {
            let kids = children[i]
                .iter()
                .filter_map(|&c| built[c].take())
                .collect();
            let label = labels.get(self.entries[i].id.as_str());
            built[i] = Some(TreeNode {
                entry: &self.entries[i],
                children: kids,
                label: label.map(|l| l.0),
                label_timestamp: label.map(|l| l.1),
            });
        }
        Tree {
            tree: roots.iter().filter_map(|&r| built[r].take()).collect(),
            leaf_id: self.leaf_id(),
        }
    }

    /// Every user message with text, across all branches, in file order.
    pub fn fork_messages(&self) -> Vec<ForkMessage> {
        self.entries
            .iter()
            .filter_map(|e| match &e.body {
                Body::Message(m) => match &**m {
                    Message::User(u) => Some(ForkMessage {
                        entry_id: e.id.clone(),
                        text: user_text(&u.content),
                    }),
                    _ => None,
                },
                _ => None,
            })
            .filter(|m| !m.text.is_empty())
            .collect()
    }
}
