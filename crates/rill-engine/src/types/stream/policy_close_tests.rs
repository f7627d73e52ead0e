//! RELEASEONCLOSE (`policy_close.rs`): a consumer's entries are handed back when the last
//! connection that read as it closes — not before, not if it read again meanwhile, not without
//! the option — as failed attempts (dead-lettered at MAXDELIVER), counted, and replayed from
//! the effects to the same state.

#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

use super::group::GroupEffect;
use super::policy::Release;
use super::policy_model_tests::run_recorded_as;
use crate::command::CommandTable;
use crate::effect::Effect;
use crate::{Engine, EngineConfig};
use bytes::Bytes;

const START_MS: i64 = 1_000_000;

struct Live {
    engine: Engine,
    table: CommandTable,
    now_ms: i64,
    log: Vec<(i64, Vec<Effect>)>,
}

impl Live {
    /// A stream `s` with entries 1-0..=n-0 (field `k`: `a` for odd, `b` for even) and group
    /// `g` with the policy `policy`.
    fn new(n: u64, policy: &str) -> Live {
        let mut live = Live {
            engine: Engine::new(EngineConfig::default()),
            table: CommandTable::new(&crate::types::families()),
            now_ms: START_MS,
            log: Vec::new(),
        };
        assert_eq!(live.run(1, "XGROUP CREATE s g $ MKSTREAM"), "+OK");
        for i in 1..=n {
            live.run(1, &format!("XADD s {i}-0 k {}", if i % 2 == 1 { "a" } else { "b" }));
        }
        assert_eq!(live.run(1, &format!("RILL.GROUP SET s g {policy}")), "+OK");
        live
    }

    /// Run one command as connection `client`.
    fn run(&mut self, client: u64, line: &str) -> String {
        let args: Vec<Bytes> = line.split_whitespace().map(|w| Bytes::copy_from_slice(w.as_bytes())).collect();
        run_recorded_as(&mut self.engine, &self.table, self.now_ms, &mut self.log, client, args)
    }

    /// The policy timer's run now: its effects.
    fn timer(&mut self) -> Vec<Effect> {
        let effects = self.engine.run_policy_timers(self.now_ms, true, &|_, _, _, _| false).decode().unwrap();
        if !effects.is_empty() {
            self.log.push((self.now_ms, effects.clone()));
        }
        effects
    }

    fn info(&mut self, field: &str) -> String {
        let info = self.run(1, "RILL.GROUP INFO s g");
        let at = info.find(&format!("{field}=")).unwrap_or_else(|| panic!("no {field} in {info}"));
        info[at + field.len() + 1..].split([' ', '}']).next().unwrap().to_owned()
    }

    fn view(&mut self) -> [String; 3] {
        [self.run(1, "XINFO STREAM s FULL"), self.run(1, "RILL.GROUP INFO s g"), self.run(1, "XRANGE {s}:dlq - +")]
    }

    /// The state the log's effects rebuild equals this one's.
    fn assert_replays(&mut self) {
        let mut copy = Live {
            engine: Engine::new(EngineConfig::default()),
            table: CommandTable::new(&crate::types::families()),
            now_ms: self.now_ms,
            log: Vec::new(),
        };
        copy.engine.set_loading(true);
        for (time, effects) in &self.log {
            for e in effects {
                copy.engine.apply_effect(&copy.table, *time, e.clone()).unwrap();
            }
        }
        copy.engine.set_loading(false);
        assert_eq!(copy.view(), self.view());
    }
}

/// The IDs of the `HandedBack` effects with reason `Closed` among `effects`.
fn closed_hand_backs(effects: &[Effect]) -> Vec<String> {
    effects
        .iter()
        .filter_map(|e| match e {
            Effect::Group { effect: GroupEffect::HandedBack { id, why: Release::Closed, .. }, .. } => {
                Some(id.to_string())
            }
            _ => None,
        })
        .collect()
}

#[test]
fn the_last_connection_closing_hands_the_consumers_entries_back() {
    let mut live = Live::new(5, "RELEASEONCLOSE 1 MAXDELIVER 5");
    assert_eq!(live.run(7, "XREADGROUP GROUP g c1 COUNT 3 STREAMS s >").matches("-0").count(), 3);
    assert_eq!(live.run(8, "XREADGROUP GROUP g c2 COUNT 1 STREAMS s >").matches("-0").count(), 1);
    // A second connection reads as c1: a history read (it delivers 1-0 again: count 2).
    live.run(9, "XREADGROUP GROUP g c1 COUNT 1 STREAMS s 0");
    assert_eq!(live.engine.next_policy_due(), None, "nothing is due while the readers live");
    assert!(!live.engine.policy_client_closed(9), "c1 still has a reader");
    assert!(live.timer().is_empty());
    live.now_ms += 5;
    assert!(live.engine.policy_client_closed(7), "c1's last reader closed");
    assert_eq!(live.engine.next_policy_due(), Some(i64::MIN), "due at once");
    assert!(live.engine.take_policy_due_moved(), "the server's timer is told");
    let effects = live.timer();
    assert_eq!(closed_hand_backs(&effects), ["1-0", "2-0", "3-0"], "{effects:?}");
    assert_eq!(live.info("released-on-close"), ":3");
    assert_eq!(live.info("handed-back"), ":0", "not counted as deadlines");
    assert_eq!(live.engine.next_policy_due(), None, "nothing left to do");
    // c2's entry stays with it; a `>` read gets the hand-backs first, each delivered once more.
    let read = live.run(8, "XREADGROUP GROUP g c2 COUNT 10 STREAMS s >");
    assert_eq!(read, "[[s [[1-0 [k a]] [2-0 [k b]] [3-0 [k a]] [5-0 [k a]]]]]");
    assert_eq!(
        live.run(1, "XPENDING s g - + 10"),
        "[[1-0 c2 :0 :3] [2-0 c2 :0 :2] [3-0 c2 :0 :2] [4-0 c2 :5 :1] [5-0 c2 :0 :1]]"
    );
    assert_eq!(live.engine.policy_reader_count(), 1, "only c2's reader is left");
    live.assert_replays();
}

#[test]
fn a_consumer_that_reads_again_before_the_timer_keeps_its_entries() {
    let mut live = Live::new(2, "RELEASEONCLOSE 1");
    live.run(7, "XREADGROUP GROUP g c1 STREAMS s >");
    assert!(live.engine.policy_client_closed(7));
    // Reconnected under the same name before the timer ran.
    live.run(8, "XREADGROUP GROUP g c1 STREAMS s >");
    assert!(live.timer().is_empty());
    assert_eq!(live.run(1, "XPENDING s g - + 10 c1").matches("c1").count(), 2);
    assert_eq!(live.info("released-on-close"), ":0");
    // The new connection's close releases them.
    assert!(live.engine.policy_client_closed(8));
    assert_eq!(closed_hand_backs(&live.timer()), ["1-0", "2-0"]);
    live.assert_replays();
}

#[test]
fn without_the_option_a_close_changes_nothing() {
    let mut live = Live::new(2, "ACKWAIT 60000");
    live.run(7, "XREADGROUP GROUP g c1 STREAMS s >");
    assert!(!live.engine.policy_client_closed(7));
    assert!(live.timer().is_empty());
    // Set after the read: that connection was never counted (its next read would be).
    assert_eq!(live.run(1, "RILL.GROUP SET s g RELEASEONCLOSE 1"), "+OK");
    assert!(!live.engine.policy_client_closed(7));
    live.run(8, "XREADGROUP GROUP g c1 STREAMS s >");
    // Unset before the close: nothing is released.
    assert_eq!(live.run(1, "RILL.GROUP UNSET s g RELEASEONCLOSE"), "+OK");
    assert!(!live.engine.policy_client_closed(8));
    assert!(live.timer().is_empty());
    assert_eq!(live.run(1, "XPENDING s g - + 10 c1").matches("c1").count(), 2);
    // A consumer that owns nothing is not marked.
    assert_eq!(live.run(1, "RILL.GROUP SET s g RELEASEONCLOSE 1"), "+OK");
    live.run(9, "XREADGROUP GROUP g c3 STREAMS s >");
    assert!(!live.engine.policy_client_closed(9));
}

#[test]
fn a_close_at_maxdeliver_dead_letters_and_backoff_delays() {
    let mut live = Live::new(2, "RELEASEONCLOSE 1 MAXDELIVER 2 BACKOFF 500");
    for client in [7, 8] {
        live.run(client, "XREADGROUP GROUP g c1 STREAMS s >");
        assert!(live.engine.policy_client_closed(client));
        live.timer();
        live.now_ms += 500;
    }
    // First close: a failed first attempt, delayed 500 ms. Second: the second attempt failed
    // at MAXDELIVER 2: dead-lettered with its provenance.
    assert_eq!(live.info("released-on-close"), ":2");
    assert_eq!(live.info("dead-lettered"), ":2");
    assert_eq!(live.run(1, "XPENDING s g - + 10"), "[]");
    let dlq = live.run(1, "XRANGE {s}:dlq - +");
    assert!(dlq.contains("maxdeliver"), "{dlq}");
    live.assert_replays();
}

#[test]
fn a_big_pel_is_handed_back_in_timer_budgets() {
    let n = super::policy_act::TIMER_BUDGET as u64 + 10;
    let mut live = Live::new(n, "RELEASEONCLOSE 1");
    live.run(7, &format!("XREADGROUP GROUP g c1 COUNT {n} STREAMS s >"));
    assert!(live.engine.policy_client_closed(7));
    assert_eq!(closed_hand_backs(&live.timer()).len(), super::policy_act::TIMER_BUDGET);
    assert_eq!(live.engine.next_policy_due(), Some(i64::MIN), "the rest at once");
    assert_eq!(closed_hand_backs(&live.timer()).len(), 10);
    assert_eq!(live.engine.next_policy_due(), None);
    assert_eq!(live.info("released-on-close"), format!(":{n}"));
}

#[test]
fn the_option_is_checked_shown_and_unset() {
    let mut live = Live::new(1, "MAXDELIVER 3");
    for bad in ["2", "yes", "-1", ""] {
        assert_eq!(
            live.run(1, &format!("RILL.GROUP SET s g MAXDELIVER 4 RELEASEONCLOSE {bad}")),
            if bad.is_empty() { "-ERR syntax error" } else { "-ERR RELEASEONCLOSE must be 0 (off) or 1 (on)" },
            "{bad:?}"
        );
    }
    assert!(live.run(1, "RILL.GROUP GET s g").contains("maxdeliver=:3"), "a rejected SET changed nothing");
    assert_eq!(live.run(1, "RILL.GROUP SET s g RELEASEONCLOSE 1"), "+OK");
    assert!(live.run(1, "RILL.GROUP GET s g").contains("releaseonclose=:1"));
    assert_eq!(live.run(1, "RILL.GROUP UNSET s g RELEASEONCLOSE"), "+OK");
    assert!(live.run(1, "RILL.GROUP GET s g").contains("releaseonclose=:0"));
    live.assert_replays();
}

#[test]
fn a_renamed_stream_keeps_its_readers() {
    let mut live = Live::new(3, "RELEASEONCLOSE 1");
    live.run(7, "XREADGROUP GROUP g c1 COUNT 2 STREAMS s >");
    // A reader of the key the rename replaces reads as nothing afterwards.
    live.run(1, "XGROUP CREATE t g $ MKSTREAM");
    live.run(1, "RILL.GROUP SET t g RELEASEONCLOSE 1");
    live.run(1, "XADD t 9-0 k a");
    live.run(8, "XREADGROUP GROUP g c1 STREAMS t >");
    assert_eq!(live.run(1, "RENAME s t"), "+OK");
    assert!(!live.engine.policy_client_closed(8), "its stream is gone");
    assert!(live.engine.policy_client_closed(7), "c1 of the renamed stream");
    let effects = live.timer();
    assert_eq!(closed_hand_backs(&effects), ["1-0", "2-0"], "{effects:?}");
    assert!(
        effects.iter().all(|e| matches!(e, Effect::Group { key, .. } if key.as_ref() == b"t")),
        "under the new name: {effects:?}"
    );
    assert_eq!(live.engine.policy_reader_count(), 0);
}
