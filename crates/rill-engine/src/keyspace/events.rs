//! Keyspace events: what a write did to a key, named as Redis names the event it publishes for
//! that change (`__keyevent@<db>__:<name>`), with the class `notify-keyspace-events` selects it
//! by.
//!
//! Every [`Engine::modified`] call names its event; expiry, key creation and the commands that
//! change a key without counting it as a WATCH-visible write record theirs directly. The engine
//! keeps the events of the running command in order ([`Engine::events`]); nothing is published
//! here (no I/O in the engine): the server reads them after the command.
//!
//! Cost: one `(db, event, key range)` record and a copy of the key bytes into a buffer that is
//! reused from command to command, so a write allocates nothing once the buffers have grown.

use super::Engine;

/// The class an event is filed under: its letter in `notify-keyspace-events`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EventClass {
    /// `g`: generic commands (DEL, EXPIRE, RENAME, ...).
    Generic,
    /// `$`: string commands.
    String,
    /// `l`: list commands.
    List,
    /// `s`: set commands.
    Set,
    /// `h`: hash commands.
    Hash,
    /// `z`: sorted-set commands.
    ZSet,
    /// `t`: stream commands.
    Stream,
    /// `x`: a key removed because its time passed.
    Expired,
    /// `e`: a key removed to free memory.
    Evicted,
    /// `n`: a key created.
    New,
    /// `o`: a key's value replaced by a new one (SET over an existing key, a RENAME, COPY or
    /// RESTORE onto one).
    Overwritten,
    /// `c`: a key overwritten by a value of another type.
    TypeChanged,
}

impl EventClass {
    /// The class' letter in `notify-keyspace-events`.
    pub fn letter(self) -> char {
        match self {
            EventClass::Generic => 'g',
            EventClass::String => '$',
            EventClass::List => 'l',
            EventClass::Set => 's',
            EventClass::Hash => 'h',
            EventClass::ZSet => 'z',
            EventClass::Stream => 't',
            EventClass::Expired => 'x',
            EventClass::Evicted => 'e',
            EventClass::New => 'n',
            EventClass::Overwritten => 'o',
            EventClass::TypeChanged => 'c',
        }
    }
}

macro_rules! key_events {
    ($($variant:ident => $name:literal, $class:ident;)*) => {
        /// One keyspace event, as Redis names it.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum KeyEvent {
            $(
                #[doc = concat!("`", $name, "`")]
                $variant,
            )*
        }

        impl KeyEvent {
            /// Every event, for tests and tables.
            pub const ALL: &'static [KeyEvent] = &[$(KeyEvent::$variant),*];

            /// The event's name: the channel suffix of `__keyevent@<db>__:<name>` and the
            /// message of `__keyspace@<db>__:<key>`.
            pub fn name(self) -> &'static str {
                match self {
                    $(KeyEvent::$variant => $name,)*
                }
            }

            /// The class `notify-keyspace-events` selects the event by.
            pub fn class(self) -> EventClass {
                match self {
                    $(KeyEvent::$variant => EventClass::$class,)*
                }
            }
        }
    };
}

key_events! {
    Del => "del", Generic;
    Expire => "expire", Generic;
    Persist => "persist", Generic;
    RenameFrom => "rename_from", Generic;
    RenameTo => "rename_to", Generic;
    MoveFrom => "move_from", Generic;
    MoveTo => "move_to", Generic;
    CopyTo => "copy_to", Generic;
    Restore => "restore", Generic;
    Expired => "expired", Expired;
    Evicted => "evicted", Evicted;
    New => "new", New;
    Overwritten => "overwritten", Overwritten;
    TypeChanged => "type_changed", TypeChanged;
    Set => "set", String;
    SetRange => "setrange", String;
    Append => "append", String;
    IncrBy => "incrby", String;
    IncrByFloat => "incrbyfloat", String;
    SetBit => "setbit", String;
    PfAdd => "pfadd", String;
    LPush => "lpush", List;
    RPush => "rpush", List;
    LPop => "lpop", List;
    RPop => "rpop", List;
    LInsert => "linsert", List;
    LSet => "lset", List;
    LTrim => "ltrim", List;
    LRem => "lrem", List;
    SortStore => "sortstore", List;
    HSet => "hset", Hash;
    HDel => "hdel", Hash;
    HIncrBy => "hincrby", Hash;
    HIncrByFloat => "hincrbyfloat", Hash;
    HExpire => "hexpire", Hash;
    HExpired => "hexpired", Hash;
    HPersist => "hpersist", Hash;
    SAdd => "sadd", Set;
    SRem => "srem", Set;
    SPop => "spop", Set;
    SInterStore => "sinterstore", Set;
    SUnionStore => "sunionstore", Set;
    SDiffStore => "sdiffstore", Set;
    ZAdd => "zadd", ZSet;
    ZIncr => "zincr", ZSet;
    ZRem => "zrem", ZSet;
    ZRemRangeByRank => "zremrangebyrank", ZSet;
    ZRemRangeByScore => "zremrangebyscore", ZSet;
    ZRemRangeByLex => "zremrangebylex", ZSet;
    ZPopMin => "zpopmin", ZSet;
    ZPopMax => "zpopmax", ZSet;
    ZUnionStore => "zunionstore", ZSet;
    ZInterStore => "zinterstore", ZSet;
    ZDiffStore => "zdiffstore", ZSet;
    ZRangeStore => "zrangestore", ZSet;
    GeoRadiusStore => "georadiusstore", ZSet;
    GeoSearchStore => "geosearchstore", ZSet;
    XAdd => "xadd", Stream;
    XTrim => "xtrim", Stream;
    XDel => "xdel", Stream;
    XSetId => "xsetid", Stream;
    XGroupCreate => "xgroup-create", Stream;
    XGroupSetId => "xgroup-setid", Stream;
    XGroupDestroy => "xgroup-destroy", Stream;
    XGroupCreateConsumer => "xgroup-createconsumer", Stream;
    XGroupDelConsumer => "xgroup-delconsumer", Stream;
    RillDeadLetter => "rill-deadletter", Stream;
    RillGroupExpired => "rill-group-expired", Stream;
}

impl std::fmt::Display for KeyEvent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// One recorded event: `event` happened to `key` in database `db`, to the fields `subkeys`
/// of it when the command names them (the hash commands, for Redis' subkey notifications).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyspaceEvent<'a> {
    /// The database.
    pub db: usize,
    /// The key.
    pub key: &'a [u8],
    /// What happened.
    pub event: KeyEvent,
    /// The fields it happened to, in the command's order; empty unless subkey events are
    /// recorded ([`Engine::set_subkey_events`]).
    pub subkeys: Vec<&'a [u8]>,
}

/// One record: database, event, the key's byte range, and the range of its subkeys in
/// `EventLog::subs`.
type Record = (usize, KeyEvent, usize, usize, usize, usize);

/// The events recorded since they were last cleared: records pointing into one byte buffer
/// (keys and subkeys), all kept (with their capacity) from command to command.
#[derive(Debug, Default)]
pub(crate) struct EventLog {
    records: Vec<Record>,
    keys: Vec<u8>,
    /// Byte ranges in `keys` of the records' subkeys.
    subs: Vec<(usize, usize)>,
    /// Whether subkeys are recorded at all (someone may publish them).
    pub(crate) want_subkeys: bool,
}

impl EventLog {
    pub(crate) fn push(&mut self, db: usize, key: &[u8], event: KeyEvent) {
        let start = self.keys.len();
        self.keys.extend_from_slice(key);
        let s = self.subs.len();
        self.records.push((db, event, start, self.keys.len(), s, s));
    }

    /// Attach `subkeys` to the last record.
    fn attach<'a>(&mut self, subkeys: impl IntoIterator<Item = &'a [u8]>) {
        if self.records.is_empty() {
            return;
        }
        for sk in subkeys {
            let start = self.keys.len();
            self.keys.extend_from_slice(sk);
            self.subs.push((start, self.keys.len()));
        }
        let end = self.subs.len();
        if let Some(last) = self.records.last_mut() {
            last.5 = end;
        }
    }

    pub(crate) fn clear(&mut self) {
        self.records.clear();
        self.keys.clear();
        self.subs.clear();
        // One huge command (a DEL of a million keys) must not pin its buffers for good.
        if self.records.capacity() > Self::KEEP_RECORDS {
            self.records.shrink_to(Self::KEEP_RECORDS);
        }
        if self.keys.capacity() > Self::KEEP_KEY_BYTES {
            self.keys.shrink_to(Self::KEEP_KEY_BYTES);
        }
    }

    /// What the buffers keep between commands at most.
    const KEEP_RECORDS: usize = 1024;
    const KEEP_KEY_BYTES: usize = 64 * 1024;

    fn iter(&self) -> impl Iterator<Item = KeyspaceEvent<'_>> + '_ {
        self.records.iter().map(|&(db, event, start, end, s0, s1)| KeyspaceEvent {
            db,
            key: self.keys.get(start..end).unwrap_or_default(),
            event,
            subkeys: self
                .subs
                .get(s0..s1)
                .unwrap_or_default()
                .iter()
                .map(|&(a, b)| self.keys.get(a..b).unwrap_or_default())
                .collect(),
        })
    }
}

impl Engine {
    /// Record that `key` was overwritten by a value of type `new_type` where one of
    /// `old_type` was (`None`: it did not exist, and nothing is recorded): `overwritten`,
    /// and `type_changed` if the types differ — what Redis records where it replaces a key's
    /// value whole.
    pub fn record_overwrite(&mut self, db: usize, key: &[u8], old_type: Option<&'static str>, new_type: &str) {
        let Some(old_type) = old_type else { return };
        self.events.push(db, key, KeyEvent::Overwritten);
        if old_type != new_type {
            self.events.push(db, key, KeyEvent::TypeChanged);
        }
    }

    /// Record from now on (`true`) the fields the hash commands change, for Redis' subkey
    /// notifications, or not (`false`: the default; naming them costs a copy of each).
    pub fn set_subkey_events(&mut self, on: bool) {
        self.events.want_subkeys = on;
    }

    /// Attach the fields `subkeys` to the event recorded last (what [`Engine::modified`] or
    /// [`Engine::record_event`] just recorded), if subkey events are recorded.
    pub fn attach_subkeys<'a>(&mut self, subkeys: impl IntoIterator<Item = &'a [u8]>) {
        if self.events.want_subkeys {
            self.events.attach(subkeys);
        }
    }

    /// Record `event` on `key` without counting a change or touching WATCH (what
    /// [`Engine::modified`] does besides): for events that are not writes of their own (a key
    /// created, expired) or a second event of one write.
    pub fn record_event(&mut self, db: usize, key: &[u8], event: KeyEvent) {
        self.events.push(db, key, event);
    }

    /// The events recorded by the command that ran last ([`Engine::call`] clears them before
    /// running it), the last effect applied ([`Engine::apply_effect`]) or the last
    /// active-expiry pass ([`Engine::active_expire`]), in the order they happened. Keys
    /// created while loading record no `new`.
    pub fn events(&self) -> impl Iterator<Item = KeyspaceEvent<'_>> + '_ {
        self.events.iter()
    }

    /// Forget the recorded events (their buffers are kept for the next command).
    pub fn clear_events(&mut self) {
        self.events.clear();
    }
}
