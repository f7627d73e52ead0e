//! Keyspace notifications (`notify-keyspace-events`): after each engine call — a command, a
//! blocked client served, an effect a replica applies, an active-expiry pass, a policy timer
//! run — the events the engine recorded (`Engine::events`, named and classed as Redis does)
//! are published over Pub/Sub as Redis publishes them: `__keyspace@<db>__:<key>` with the
//! event's name, and `__keyevent@<db>__:<event>` with the key, for the classes selected.
//!
//! Off (the default) it costs one branch per call: the engine keeps recording (into buffers it
//! reuses) and the events are dropped with the next call.

use bytes::Bytes;
use rill_engine::EventClass;

use crate::state::State;

/// What `notify-keyspace-events` selects, read once per CONFIG SET (`HotConfig`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Notify {
    /// `K`: `__keyspace@<db>__:<key>` channels.
    keyspace: bool,
    /// `E`: `__keyevent@<db>__:<event>` channels.
    keyevent: bool,
    /// The subkey channels of the fields an event names (hash commands): `S`
    /// `__subkeyspace@<db>__:<key>`, `T` `__subkeyevent@<db>__:<event>`, `I`
    /// `__subkeyspaceitem@<db>__:<key>\n<field>`, `V` `__subkeyspaceevent@<db>__:<event>|<key>`.
    subkeyspace: bool,
    subkeyevent: bool,
    subkeyspaceitem: bool,
    subkeyspaceevent: bool,
    /// The classes' letters selected, as a bit set over [`CLASS_LETTERS`].
    classes: u16,
}

/// Every class letter the engine files events under.
const CLASS_LETTERS: &str = "g$lshzxetdnoc";

fn bit(letter: char) -> u16 {
    CLASS_LETTERS.find(letter).map_or(0, |i| 1 << i)
}

impl Notify {
    /// From `Config::keyspace_event_letters` (`A` already expanded).
    pub fn from_letters(letters: &str) -> Notify {
        Notify {
            keyspace: letters.contains('K'),
            keyevent: letters.contains('E'),
            subkeyspace: letters.contains('S'),
            subkeyevent: letters.contains('T'),
            subkeyspaceitem: letters.contains('I'),
            subkeyspaceevent: letters.contains('V'),
            classes: letters.chars().fold(0, |set, c| set | bit(c)),
        }
    }

    /// Whether anything would be published (a channel kind and a class).
    pub fn on(self) -> bool {
        (self.keyspace || self.keyevent || self.subkeys()) && self.classes != 0
    }

    /// Whether a subkey channel is selected: the engine then records the fields events name.
    pub fn subkeys(self) -> bool {
        self.subkeyspace || self.subkeyevent || self.subkeyspaceitem || self.subkeyspaceevent
    }

    fn selects(self, class: EventClass) -> bool {
        self.classes & bit(class.letter()) != 0
    }
}

/// Publish the events the engine recorded in its last call, then forget them.
pub fn publish_events(st: &mut State, now_ms: i64) {
    let notify = st.hot.notify;
    if !notify.on() {
        return;
    }
    type Event = (usize, Bytes, &'static str, Vec<Bytes>);
    let events: Vec<Event> = st
        .engine
        .events()
        .filter(|e| notify.selects(e.event.class()))
        .map(|e| {
            let subkeys = e.subkeys.iter().map(|s| Bytes::copy_from_slice(s)).collect();
            (e.db, Bytes::copy_from_slice(e.key), e.event.name(), subkeys)
        })
        .collect();
    st.engine.clear_events();
    for (db, key, name, subkeys) in events {
        if notify.keyspace {
            let mut channel = format!("__keyspace@{db}__:").into_bytes();
            channel.extend_from_slice(&key);
            crate::pubsub::publish(st, false, &Bytes::from(channel), &Bytes::from_static(name.as_bytes()), now_ms);
        }
        if notify.keyevent {
            let channel = Bytes::from(format!("__keyevent@{db}__:{name}"));
            crate::pubsub::publish(st, false, &channel, &key, now_ms);
        }
        if !subkeys.is_empty() {
            publish_subkeys(st, notify, db, &key, name, &subkeys, now_ms);
        }
    }
}

/// `<len>:<subkey>[,<len>:<subkey>...]`, appended to `out`.
fn subkeys_payload(out: &mut Vec<u8>, subkeys: &[Bytes]) {
    for (i, s) in subkeys.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        out.extend_from_slice(format!("{}:", s.len()).as_bytes());
        out.extend_from_slice(s);
    }
}

/// The newest Redis' subkey notifications of one event (its fields `subkeys`), on the
/// channels selected, in Redis' order and formats.
fn publish_subkeys(st: &mut State, notify: Notify, db: usize, key: &Bytes, name: &str, subkeys: &[Bytes], now_ms: i64) {
    let publish = |st: &mut State, channel: Vec<u8>, message: Vec<u8>| {
        crate::pubsub::publish(st, false, &Bytes::from(channel), &Bytes::from(message), now_ms);
    };
    if notify.subkeyspace {
        let mut channel = format!("__subkeyspace@{db}__:").into_bytes();
        channel.extend_from_slice(key);
        let mut message = format!("{name}|").into_bytes();
        subkeys_payload(&mut message, subkeys);
        publish(st, channel, message);
    }
    if notify.subkeyevent {
        let channel = format!("__subkeyevent@{db}__:{name}").into_bytes();
        let mut message = format!("{}:", key.len()).into_bytes();
        message.extend_from_slice(key);
        message.push(b'|');
        subkeys_payload(&mut message, subkeys);
        publish(st, channel, message);
    }
    // One message per field; not for a key holding a newline (the channel could not be read back).
    if notify.subkeyspaceitem && !key.contains(&b'\n') {
        for s in subkeys {
            let mut channel = format!("__subkeyspaceitem@{db}__:").into_bytes();
            channel.extend_from_slice(key);
            channel.push(b'\n');
            channel.extend_from_slice(s);
            publish(st, channel, name.as_bytes().to_vec());
        }
    }
    if notify.subkeyspaceevent && !name.contains('|') {
        let mut channel = format!("__subkeyspaceevent@{db}__:{name}|").into_bytes();
        channel.extend_from_slice(key);
        let mut message = Vec::new();
        subkeys_payload(&mut message, subkeys);
        publish(st, channel, message);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn letters_select_channels_and_classes() {
        let n = Notify::from_letters("g$lshzxetdKE");
        assert!(n.on() && n.keyspace && n.keyevent);
        assert!(n.selects(EventClass::Stream) && n.selects(EventClass::Expired));
        assert!(!n.selects(EventClass::New), "n is not part of A");
        assert!(Notify::from_letters("g$lshzxetdnK").selects(EventClass::New));
        assert!(!Notify::from_letters("t").on(), "no channel kind: nothing is published");
        assert!(!Notify::from_letters("KE").on(), "no class: nothing is published");
        assert!(!Notify::from_letters("").on());
    }
}
