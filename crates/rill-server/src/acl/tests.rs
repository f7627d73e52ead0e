use super::*;
use rill_engine::command::KeyPlan;

fn reg() -> Registry {
    Registry::new(&crate::cmd::table())
}

fn user(r: &Registry, ops: &[&str]) -> Result<User, String> {
    let mut u = User::new(b"u", false);
    let ops: Vec<Bytes> = ops.iter().map(|o| Bytes::copy_from_slice(o.as_bytes())).collect();
    u.set_all(&r.commands, &ops, false)?;
    Ok(u)
}

fn args(words: &[&str]) -> Vec<Bytes> {
    words.iter().map(|w| Bytes::copy_from_slice(w.as_bytes())).collect()
}

fn check(r: &Registry, u: &User, words: &[&str]) -> Result<(), Denied> {
    let a = args(words);
    let spec = match r.commands.lookup(words[0]) {
        Some(s) if s.is_container() => r.commands.lookup(&format!("{}|{}", words[0], words[1])).unwrap(),
        Some(s) => s,
        None => panic!("no command {}", words[0]),
    };
    u.check(&r.commands, spec, &a)
}

#[test]
fn default_user_is_described_as_redis_does() {
    let r = reg();
    let lines = r.lines();
    assert_eq!(lines, vec![b"user default on nopass sanitize-payload ~* &* +@all".to_vec()]);
}

#[test]
fn command_rules_keep_redis_order_and_replace_earlier_ones() {
    let r = reg();
    let u = user(&r, &["+@all", "-config", "+config|get", "-DEBUG", "+debug|digest"]).unwrap();
    assert_eq!(u.selectors[0].describe_commands(), "+@all -config +config|get -debug +debug|digest");
    let u = user(&r, &["-@all", "+config|get", "+config|set", "+config"]).unwrap();
    assert_eq!(u.selectors[0].describe_commands(), "-@all +config");
    let u = user(&r, &["+@read", "-@READ", "+get"]).unwrap();
    assert_eq!(u.selectors[0].describe_commands(), "-@all -@read +get");
    let u = user(&r, &["+select|0"]).unwrap();
    assert_eq!(u.selectors[0].describe_commands(), "-@all +select|0");
}

#[test]
fn rule_errors_are_redis_texts() {
    let r = reg();
    let e = |ops: &[&str]| user(&r, ops).unwrap_err();
    assert_eq!(e(&["+nosuch"]), "Error in ACL SETUSER modifier '+nosuch': Unknown command or category name in ACL");
    assert_eq!(e(&["+@nosuch"]), "Error in ACL SETUSER modifier '+@nosuch': Unknown command or category name in ACL");
    assert_eq!(
        e(&["+config|get|x"]),
        "Error in ACL SETUSER modifier '+config|get|x': Allowing first-arg of a subcommand is not supported"
    );
    assert_eq!(e(&["+select|"]), "Error in ACL SETUSER modifier '+select|': Syntax error");
    assert_eq!(e(&["bogus"]), "Error in ACL SETUSER modifier 'bogus': Syntax error");
    assert!(e(&["~*", "~foo"]).contains("Try 'resetkeys'"));
    assert!(e(&["&*", "&foo"]).contains("Try 'resetchannels'"));
    assert!(e(&["<nosuch"]).ends_with("The password you are trying to remove from the user does not exist"));
    assert!(e(&["#abc"]).ends_with("only lowercase hexadecimal characters"));
    assert_eq!(e(&["(~x", "+get"]), "Unmatched parenthesis in acl selector starting at '(~x'.");
    assert_eq!(e(&["%X~foo"]), "Error in ACL SETUSER modifier '%X~foo': Syntax error");
}

#[test]
fn keys_read_and_write_patterns() {
    let r = reg();
    let u = user(&r, &["on", "+@all", "%R~read*", "%W~write*", "~rw*"]).unwrap();
    assert_eq!(u.selectors[0].describe_keys(), b"%R~read* %W~write* ~rw*".to_vec());
    assert_eq!(check(&r, &u, &["get", "read1"]), Ok(()));
    assert_eq!(check(&r, &u, &["set", "read1", "v"]), Err(Denied::Key(1)));
    assert_eq!(check(&r, &u, &["set", "write1", "v"]), Ok(()));
    assert_eq!(check(&r, &u, &["get", "write1"]), Err(Denied::Key(1)));
    assert_eq!(check(&r, &u, &["xadd", "rw1", "*", "f", "v"]), Ok(()));
    // COPY reads the source and writes the destination.
    assert_eq!(check(&r, &u, &["copy", "read1", "write1"]), Ok(()));
    assert_eq!(check(&r, &u, &["copy", "write1", "read1"]), Err(Denied::Key(1)));
}

#[test]
fn selectors_are_alternatives_and_the_most_relevant_refusal_wins() {
    let r = reg();
    let u = user(&r, &["on", "+get", "~a*", "(+set ~b*)"]).unwrap();
    assert_eq!(
        u.describe(),
        b"on sanitize-payload ~a* resetchannels -@all +get (~b* resetchannels -@all +set)".to_vec()
    );
    assert_eq!(check(&r, &u, &["get", "a1"]), Ok(()));
    assert_eq!(check(&r, &u, &["set", "b1", "v"]), Ok(()));
    assert_eq!(check(&r, &u, &["set", "a1", "v"]), Err(Denied::Key(1)));
    assert_eq!(check(&r, &u, &["del", "a1"]), Err(Denied::Command));
}

#[test]
fn channels_patterns_and_literal_pattern_subscriptions() {
    let r = reg();
    let u = user(&r, &["on", "+@all", "~*", "&news.*"]).unwrap();
    assert_eq!(check(&r, &u, &["publish", "news.x", "m"]), Ok(()));
    assert_eq!(check(&r, &u, &["publish", "other", "m"]), Err(Denied::Channel(1)));
    assert_eq!(check(&r, &u, &["subscribe", "news.a", "other"]), Err(Denied::Channel(2)));
    assert_eq!(check(&r, &u, &["psubscribe", "news.*"]), Ok(()));
    assert_eq!(check(&r, &u, &["psubscribe", "news.a*"]), Err(Denied::Channel(1)));
    assert_eq!(check(&r, &u, &["unsubscribe", "other"]), Ok(()));
}

#[test]
fn first_args_and_subcommands() {
    let r = reg();
    let u = user(&r, &["on", "-@all", "+select|0", "+config|get"]).unwrap();
    assert_eq!(check(&r, &u, &["select", "0"]), Ok(()));
    assert_eq!(check(&r, &u, &["select", "1"]), Err(Denied::Command));
    assert_eq!(check(&r, &u, &["config", "get", "x"]), Ok(()));
    assert_eq!(check(&r, &u, &["config", "set", "x", "y"]), Err(Denied::Command));
    // AUTH and HELLO are always allowed.
    assert_eq!(check(&r, &u, &["auth", "x"]), Ok(()));
}

#[test]
fn passwords_hash_and_nopass() {
    let r = reg();
    let u = user(&r, &["on", ">secret"]).unwrap();
    assert!(u.password_ok(b"secret"));
    assert!(!u.password_ok(b"other"));
    assert_eq!(u.passwords, vec![hash_password(b"secret")]);
    let off = user(&r, &["off", "nopass"]).unwrap();
    assert!(!off.password_ok(b"x"));
    let u = user(&r, &[">a", ">b", "<a"]).unwrap();
    assert_eq!(u.passwords, vec![hash_password(b"b")]);
}

#[test]
fn acl_file_lines_load_and_report_errors() {
    let r = reg();
    let w = |l: &str| l.split(' ').map(|x| Bytes::copy_from_slice(x.as_bytes())).collect::<Vec<_>>();
    let users = r.users_from_lines("users.acl", &[(1, w("user alice on >p ~* +get"))]).unwrap();
    assert_eq!(users.by_name.len(), 2, "the default user is added");
    let err = r.users_from_lines("users.acl", &[(3, w("user bob on +nosuch"))]).unwrap_err();
    assert_eq!(err, "users.acl:3: Error in applying operation '+nosuch': Unknown command or category name in ACL. ");
}

#[test]
fn prefix_patterns_match_as_globs_do() {
    let r = reg();
    let u = user(&r, &["on", "+@all", "~orders:*", "~a?c*", "~x\\*y*"]).unwrap();
    for (key, allowed) in [
        ("orders:1", true),
        ("orders:", true),
        ("orders", false),
        ("Orders:1", false),
        ("abc", true),
        ("abcd", true),
        ("ac", false),
        ("x*y1", true),
        ("xzy1", false),
    ] {
        assert_eq!(check(&r, &u, &["get", key]).is_ok(), allowed, "{key}");
        assert_eq!(
            u.selectors[0].patterns.iter().any(|p| rill_engine::glob::glob_match(&p.pattern, key.as_bytes(), false)),
            allowed,
            "{key}: the glob agrees"
        );
    }
}

#[test]
fn every_commands_key_plan_finds_the_keys_its_key_specs_do() {
    // The plan worked out once per command must name the same keys, with the same access, as
    // a walk of the key specs, for calls of every length and with words the specs look for.
    let r = reg();
    let words = ["k", "0", "1", "2", "3", "-1", "STREAMS", "STORE", "STOREDIST", "BY", "GET", "FROM", "x"];
    for &spec in &r.commands.all {
        let plan = spec.key_plan();
        for len in 1..=9usize {
            for shift in 0..words.len() {
                let call: Vec<Bytes> = (0..len)
                    .map(|i| Bytes::from(words.get((i * 7 + shift) % words.len()).copied().unwrap_or("k")))
                    .collect();
                let mut by_plan = Vec::new();
                let _ = plan.try_keys(spec, &call, |i, access| {
                    by_plan.push((i, access));
                    Ok::<(), ()>(())
                });
                assert_eq!(by_plan, spec.key_refs(&call), "{} {plan:?} {call:?}", spec.name);
            }
        }
    }
    // The commands of a stream pipeline's hot path have their keys at fixed places: their
    // check walks no specs.
    for name in ["get", "incr", "hset", "lpush", "xadd", "xack", "xclaim", "xautoclaim", "mget", "del"] {
        let plan = r.commands.lookup(name).map(|s| s.key_plan());
        assert!(matches!(plan, Some(KeyPlan::Range { .. })), "{name}: {plan:?}");
    }
}
