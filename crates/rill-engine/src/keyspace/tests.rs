//! The keyspace's numbered table: the two runs of [`super::Db`] (keys with an expiry first)
//! hold through every way a key or its expiry comes and goes.
#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

use super::{Engine, EngineConfig, Value};
use bytes::Bytes;

fn val() -> Value {
    Value::Str(Bytes::from_static(b"v"))
}

#[test]
fn runs_hold_through_random_changes() {
    let mut e = Engine::new(EngineConfig::default());
    let now = 1_000;
    let mut seed = 0x2545_F491_4F6C_DD1Du64;
    let mut next = move |n: u64| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed % n
    };
    for step in 0..20_000 {
        let key = Bytes::from(format!("k{}", next(300)));
        match next(8) {
            0 => e.insert(0, key.clone(), val()),
            1 => e.insert_copy(0, &key, val()),
            2 => e.insert_keep_ttl(0, key.clone(), val()),
            3 => {
                e.lookup_or_insert(0, &key, now, val);
            }
            4 => {
                e.remove(0, &key);
            }
            5 => {
                e.set_expire(0, &key, None);
            }
            // Expiries on both sides of `now`, some shared by several keys.
            _ => {
                e.set_expire(0, &key, Some(now - 50 + next(100) as i64));
            }
        }
        let d = e.db(0);
        d.check_runs();
        if step % 500 == 0 {
            let live = d.iter().any(|(_, en)| !en.is_expired(now));
            assert_eq!(d.has_live_key(now), live, "step {step}");
        }
    }
}

#[test]
fn live_expiring_key_is_live_and_spread() {
    let mut e = Engine::new(EngineConfig::default());
    let now = 1_000;
    for i in 0..100 {
        e.insert(0, Bytes::from(format!("dead{i}")), val());
        e.set_expire(0, format!("dead{i}").as_bytes(), Some(now - i));
    }
    assert!(!e.db(0).has_live_key(now));
    assert_eq!(e.db(0).live_expiring_key(now, 7), None);
    for i in 0..10 {
        e.insert(0, Bytes::from(format!("live{i}")), val());
        e.set_expire(0, format!("live{i}").as_bytes(), Some(now + 1 + i * 10));
    }
    assert!(e.db(0).has_live_key(now));
    let mut seen = std::collections::HashSet::new();
    for draw in 0..1000u64 {
        let k = e.db(0).live_expiring_key(now, draw.wrapping_mul(0x9E37_79B9_7F4A_7C15)).unwrap().to_vec();
        assert!(k.starts_with(b"live"), "{k:?}");
        seen.insert(k);
    }
    assert_eq!(seen.len(), 10, "every live key can be drawn");
    // Keys without an expiry make the database live whatever the expiries say.
    e.insert(0, Bytes::from_static(b"forever"), val());
    assert!(e.db(0).has_live_key(i64::MAX));
}

#[test]
fn flush_swap_and_drain_keep_the_runs() {
    let mut e = Engine::new(EngineConfig::default());
    for i in 0..50 {
        e.insert(0, Bytes::from(format!("k{i}")), val());
        if i % 3 == 0 {
            e.set_expire(0, format!("k{i}").as_bytes(), Some(5_000 + i));
        }
    }
    e.swap_db(0, 1, 0);
    e.db(1).check_runs();
    e.db(0).check_runs();
    assert_eq!(e.drain_dbs()[1].len(), 50);
    e.db(1).check_runs();
}
