//! The four extra Lua libraries that Redis scripts expect: `bit` (LuaBitOp), `cjson`, `cmsgpack`
//! and `struct`, written in safe Rust on top of mlua so that they behave like the C libraries
//! bundled with Redis 8.2.3: same results, same error texts.
//!
//! Behaviours that matter, shared by all four:
//!
//! * Errors are Lua *strings*, as `luaL_error` raises them from a C function: prefixed with the
//!   position of the Lua code that called the library function (`user_script:1: Expected value
//!   but found invalid token at character 1`), without prefix when it was called from C
//!   (`pcall(cjson.decode, "x")` gives `false, "Expected value ..."`). mlua can only raise Rust
//!   errors as userdata, so every library function is a small Lua closure (chunk `=rill`)
//!   around the Rust implementation: the Rust side returns `true, results...` or `false, message`
//!   and the closure calls `error(message, 0)`.
//! * Argument errors read `bad argument #N to 'NAME' (...)`, NAME being the name the caller used
//!   (`'tobit'`, a local's name, `'?'` under `pcall`), found with the debug API as
//!   `luaL_argerror` does; a method call (`t:f()`) shifts N, N = 0 is "calling 'f' on bad self".
//! * Known limit of the closure: when a script makes a *tail call* to a library function
//!   (`return cjson.decode(x)`), Lua 5.1 replaces the script's frame with the closure's, so that
//!   error has no position prefix and names the function by its field name. Everything else,
//!   results included, is unaffected.
//! * The C functions run under Lua 5.1's limit of 8000 stack slots per C call
//!   (`LUAI_MAXCSTACK`); several behaviours (the nesting depth at which errors come once the depth
//!   limits are raised, "too many results", "Too many arguments for MessagePack pack.") follow
//!   from it, so the Rust code counts the slots the C code would use and fails at the same point.
//! * mlua can hold only about 8000 live references at once (its auxiliary thread has the same
//!   limit, and running out panics), so nothing here keeps one reference per nesting level or per
//!   result: the ancestors of the container being walked or built are kept in a Lua table, many
//!   results are spilled into a Lua table that the closure unpacks, and a call with many
//!   arguments hands them over packed in a table.
//!
//! [`open_all`] sets the globals `bit`, `cjson`, `cmsgpack` and `struct` to plain tables; the
//! caller makes them read-only. Library state (the closures' helpers, `cjson`'s read-only array
//! metatable) lives in the registry under [`REGISTRY_KEY`]. An error handler that looks for the
//! script line of an error (as Redis' does with `debug.getinfo`) should skip frames of the chunk
//! `=rill` (these closures) and tail-call frames (`what == "tail"`), besides C frames.

use std::sync::atomic::AtomicU8;

use mlua::{Function, LightUserData, Lua, MultiValue, Table, Value};

pub mod bit;
pub mod cjson;
pub mod cmsgpack;
pub mod structlib;

/// Named registry value (a table) holding the helpers shared by the libraries.
pub const REGISTRY_KEY: &str = "rill.script.libs";

/// Lua 5.1's `LUAI_MAXCSTACK`: a C function may use at most this many stack slots.
pub(crate) const MAX_C_STACK: i64 = 8000;

/// Up to this many results are returned directly; more go through a Lua table.
const DIRECT_RESULTS: usize = 16;

/// Calls with more arguments than this pass them packed in a table.
const DIRECT_ARGS: usize = 32;

/// Its address marks "arguments packed in a table" (scripts cannot forge a light userdata).
static PACKED_ARGS_MARK: AtomicU8 = AtomicU8::new(0);

fn packed_mark() -> LightUserData {
    LightUserData(std::ptr::from_ref(&PACKED_ARGS_MARK).cast_mut().cast())
}

/// The Lua side of every library function: argument packing, result unpacking and errors.
const WRAPPER_SRC: &str = r#"
local impl, unpack, error, select, mark = ...
local function finish(ok, ...)
  if ok == true then return ... end
  if ok == false then error((...), 0) end
  local n = ...
  if n <= 7000 then return unpack(ok, 1, n) end
  return ok[1], ok[2], ok[3], ok[4], ok[5], ok[6], ok[7], ok[8], ok[9], ok[10], unpack(ok, 11, n)
end
return function(...)
  local n = select('#', ...)
  if n > __DIRECT_ARGS__ then return finish(impl(mark, {...}, n)) end
  return finish(impl(...))
end
"#;

/// Builds the read-only metatable that `cjson.decode_array_with_array_mt(true)` puts on arrays.
const ARRAY_MT_SRC: &str = r#"
local setmetatable, error = ...
local fields = { __is_cjson_array = true }
return setmetatable({}, {
  __index = fields,
  __newindex = function() error("Attempt to modify a readonly table", 2) end,
  __metatable = false,
})
"#;

/// Sets the globals `bit`, `cjson`, `cmsgpack` and `struct`. Needs the base library (`error`,
/// `unpack`, `select`, `next`, `setmetatable` are captured once, here).
pub fn open_all(lua: &Lua) -> mlua::Result<()> {
    let globals = lua.globals();
    let reg = lua.create_table()?;
    let wrapper_src = WRAPPER_SRC.replace("__DIRECT_ARGS__", &DIRECT_ARGS.to_string());
    let factory = lua.load(wrapper_src).set_name("=rill").into_function()?;
    reg.raw_set("factory", factory)?;
    for name in ["unpack", "error", "select", "next"] {
        let f: Function = globals.get(name)?;
        reg.raw_set(name, f)?;
    }
    let setmetatable: Function = globals.get("setmetatable")?;
    let error: Function = globals.get("error")?;
    let array_mt: Table = lua.load(ARRAY_MT_SRC).set_name("=rill").into_function()?.call((setmetatable, error))?;
    reg.raw_set("array_mt", array_mt)?;
    lua.set_named_registry_value(REGISTRY_KEY, reg)?;

    globals.set("cjson", cjson::open(lua)?)?;
    globals.set("struct", structlib::open(lua)?)?;
    globals.set("cmsgpack", cmsgpack::open(lua)?)?;
    globals.set("bit", bit::open(lua)?)?;
    Ok(())
}

/// The shared helpers from the registry.
pub(crate) fn registry(lua: &Lua) -> mlua::Result<Table> {
    lua.named_registry_value(REGISTRY_KEY)
}

/// An error raised by a library function.
#[derive(Debug)]
pub(crate) enum LibError {
    /// `luaL_error`: the message, after the caller's position as `luaL_where(L, 1)` gives it.
    Runtime(Vec<u8>),
    /// `luaL_argerror`: becomes "bad argument #N to 'NAME' (msg)", after the caller's position.
    Arg(i64, Vec<u8>),
    /// An error the Lua core raises in a C function (`luaG_runerror`): no position.
    Raw(Vec<u8>),
    /// An error from mlua itself (memory, ...), passed through.
    Lua(mlua::Error),
}

impl From<mlua::Error> for LibError {
    fn from(e: mlua::Error) -> Self {
        LibError::Lua(e)
    }
}

pub(crate) type LibResult<T> = Result<T, LibError>;

/// `luaL_error`.
pub(crate) fn rt_err<T>(msg: impl Into<Vec<u8>>) -> LibResult<T> {
    Err(LibError::Runtime(msg.into()))
}

/// `luaL_argerror`.
pub(crate) fn arg_err<T>(narg: i64, msg: impl Into<Vec<u8>>) -> LibResult<T> {
    Err(LibError::Arg(narg, msg.into()))
}

/// `luaL_typerror`: "bad argument #N to 'f' (number expected, got nil)".
fn type_err<T>(narg: i64, expected: &str, got: &str) -> LibResult<T> {
    arg_err(narg, format!("{expected} expected, got {got}"))
}

/// `lua_typename(lua_type(v))`.
pub(crate) fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Nil => "nil",
        Value::Boolean(_) => "boolean",
        Value::Integer(_) | Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Table(_) => "table",
        Value::Function(_) => "function",
        Value::Thread(_) => "thread",
        _ => "userdata",
    }
}

/// The number in a number value (Lua 5.1 numbers are doubles; mlua hands integral ones over as
/// `Integer`).
pub(crate) fn as_number(v: &Value) -> Option<f64> {
    match v {
        Value::Integer(i) => Some(*i as f64),
        Value::Number(n) => Some(*n),
        _ => None,
    }
}

/// `lua_tonumber` with `lua_isnumber`: numbers, and strings Lua converts.
pub(crate) fn to_number(lua: &Lua, v: &Value) -> mlua::Result<Option<f64>> {
    match v {
        Value::Integer(_) | Value::Number(_) => Ok(as_number(v)),
        Value::String(_) => lua.coerce_number(v.clone()),
        _ => Ok(None),
    }
}

/// C's `(int)d` on x86-64: truncation, and `INT_MIN` when out of range or NaN.
pub(crate) fn c_f64_to_i32(d: f64) -> i32 {
    if d > -2147483649.0 && d < 2147483648.0 {
        d as i32
    } else {
        i32::MIN
    }
}

/// C's `(int64_t)d` on x86-64: truncation, and `INT64_MIN` when out of range or NaN.
pub(crate) fn c_f64_to_i64(d: f64) -> i64 {
    if (-9223372036854775808.0..9223372036854775808.0).contains(&d) {
        d as i64
    } else {
        i64::MIN
    }
}

/// C's `(uint64_t)d` as gcc compiles it on x86-64.
pub(crate) fn c_f64_to_u64(d: f64) -> u64 {
    const TWO63: f64 = 9223372036854775808.0;
    if d >= TWO63 {
        (c_f64_to_i64(d - TWO63) as u64) ^ (1u64 << 63)
    } else {
        c_f64_to_i64(d) as u64
    }
}

/// The arguments of a call, by 1-based index as in the C API.
#[derive(Debug, Clone)]
pub(crate) enum Args {
    Direct(Vec<Value>),
    Packed(Table, usize),
}

impl Args {
    fn new(mv: MultiValue) -> Self {
        let mut vals = mv.into_vec();
        let packed = matches!(vals.first(), Some(Value::LightUserData(p)) if *p == packed_mark());
        if packed && vals.len() == 3 {
            if let (Some(Value::Integer(n)), Some(Value::Table(t))) = (vals.pop(), vals.pop()) {
                return Args::Packed(t, usize::try_from(n).unwrap_or(0));
            }
        }
        Args::Direct(vals)
    }

    /// The arguments followed by a nil, as after `lua_pushnil(L)` in the C function.
    pub(crate) fn with_nil_mark(self) -> Self {
        match self {
            Args::Direct(mut v) => {
                v.push(Value::Nil);
                Args::Direct(v)
            }
            // The table has nothing past its last argument.
            Args::Packed(t, n) => Args::Packed(t, n + 1),
        }
    }

    /// `lua_gettop`.
    pub(crate) fn len(&self) -> usize {
        match self {
            Args::Direct(v) => v.len(),
            Args::Packed(_, n) => *n,
        }
    }

    /// Argument `i` (1-based); `None` past the end ("no value").
    pub(crate) fn get(&self, i: usize) -> mlua::Result<Option<Value>> {
        if i == 0 || i > self.len() {
            return Ok(None);
        }
        match self {
            Args::Direct(v) => Ok(v.get(i - 1).cloned()),
            Args::Packed(t, _) => Ok(Some(t.raw_get(i)?)),
        }
    }

    /// `lua_isnoneornil`.
    pub(crate) fn is_none_or_nil(&self, i: usize) -> mlua::Result<bool> {
        Ok(matches!(self.get(i)?, None | Some(Value::Nil)))
    }

    fn type_name(&self, i: usize) -> mlua::Result<&'static str> {
        Ok(match self.get(i)? {
            None => "no value",
            Some(v) => type_name(&v),
        })
    }

    /// `lua_tonumber`: 0 when not convertible.
    pub(crate) fn to_number(&self, lua: &Lua, i: usize) -> mlua::Result<Option<f64>> {
        match self.get(i)? {
            None => Ok(None),
            Some(v) => to_number(lua, &v),
        }
    }

    /// `luaL_checknumber`.
    pub(crate) fn check_number(&self, lua: &Lua, i: usize) -> LibResult<f64> {
        match self.to_number(lua, i)? {
            Some(n) => Ok(n),
            None => type_err(i as i64, "number", self.type_name(i)?),
        }
    }

    /// `luaL_checkinteger` (`lua_Integer` is 64 bits; the double is truncated as C does).
    pub(crate) fn check_integer(&self, lua: &Lua, i: usize) -> LibResult<i64> {
        Ok(c_f64_to_i64(self.check_number(lua, i)?))
    }

    /// `luaL_optinteger`.
    pub(crate) fn opt_integer(&self, lua: &Lua, i: usize, def: i64) -> LibResult<i64> {
        if self.is_none_or_nil(i)? {
            Ok(def)
        } else {
            self.check_integer(lua, i)
        }
    }

    /// `luaL_checklstring`: strings, and numbers converted as Lua does ("%.14g").
    pub(crate) fn check_string(&self, lua: &Lua, i: usize) -> LibResult<mlua::String> {
        match self.get(i)? {
            Some(Value::String(s)) => Ok(s),
            Some(v @ (Value::Integer(_) | Value::Number(_))) => match lua.coerce_string(v)? {
                Some(s) => Ok(s),
                None => type_err(i as i64, "string", "number"),
            },
            _ => type_err(i as i64, "string", self.type_name(i)?),
        }
    }
}

/// Results of a call; many results are spilled into a Lua table.
#[derive(Debug, Default)]
pub(crate) struct Returns {
    direct: Vec<Value>,
    spill: Option<Table>,
    n: usize,
}

impl Returns {
    pub(crate) fn new() -> Self {
        Returns::default()
    }

    pub(crate) fn one(v: Value) -> Self {
        Returns { direct: vec![v], spill: None, n: 1 }
    }

    /// How many results so far.
    pub(crate) fn len(&self) -> usize {
        self.n
    }

    pub(crate) fn push(&mut self, lua: &Lua, v: Value) -> mlua::Result<()> {
        self.n += 1;
        if let Some(t) = &self.spill {
            return t.raw_set(self.n, v);
        }
        if self.direct.len() < DIRECT_RESULTS {
            self.direct.push(v);
            return Ok(());
        }
        let t = lua.create_table_with_capacity(DIRECT_RESULTS * 4, 0)?;
        for (i, d) in self.direct.drain(..).enumerate() {
            t.raw_set(i + 1, d)?;
        }
        t.raw_set(self.n, v)?;
        self.spill = Some(t);
        Ok(())
    }

    /// Replaces result `i` (1-based, already pushed).
    pub(crate) fn set(&mut self, i: usize, v: Value) -> mlua::Result<()> {
        if let Some(t) = &self.spill {
            return t.raw_set(i, v);
        }
        if let Some(slot) = i.checked_sub(1).and_then(|j| self.direct.get_mut(j)) {
            *slot = v;
        }
        Ok(())
    }

    /// Removes the last result (`lua_pop(L, 1)`).
    pub(crate) fn pop(&mut self) -> mlua::Result<Option<Value>> {
        if self.n == 0 {
            return Ok(None);
        }
        let v = match &self.spill {
            Some(t) => {
                let v: Value = t.raw_get(self.n)?;
                t.raw_set(self.n, Value::Nil)?;
                v
            }
            None => self.direct.pop().unwrap_or(Value::Nil),
        };
        self.n -= 1;
        Ok(Some(v))
    }

    /// The last result, if any.
    pub(crate) fn last(&self) -> mlua::Result<Option<Value>> {
        if self.n == 0 {
            return Ok(None);
        }
        match &self.spill {
            Some(t) => Ok(Some(t.raw_get(self.n)?)),
            None => Ok(self.direct.last().cloned()),
        }
    }

    fn into_multi(self) -> MultiValue {
        match self.spill {
            Some(t) => MultiValue::from_vec(vec![Value::Table(t), Value::Integer(self.n as i64)]),
            None => {
                let mut v = Vec::with_capacity(self.direct.len() + 1);
                v.push(Value::Boolean(true));
                v.extend(self.direct);
                MultiValue::from_vec(v)
            }
        }
    }
}

/// `luaL_where(L, 1)` seen from a library function: "chunk:line: " of the Lua function that called
/// it, or nothing (called from C, e.g. by `pcall`, or in a tail call, whose caller is gone).
fn where_prefix(lua: &Lua) -> Vec<u8> {
    // Level 0 is the Rust function, level 1 the Lua closure, level 2 the closure's caller.
    lua.inspect_stack(2, |d| match d.current_line() {
        Some(line) if line > 0 => {
            let src = d.source();
            format!("{}:{line}: ", src.short_src.as_deref().unwrap_or("?")).into_bytes()
        }
        _ => Vec::new(),
    })
    .unwrap_or_default()
}

/// The text `luaL_argerror` would build, naming the function as its caller sees it.
fn arg_error_text(lua: &Lua, default_name: &str, mut narg: i64, msg: &[u8]) -> Vec<u8> {
    // Level 0 is the Rust function, level 1 the Lua closure the script called.
    let info = lua.inspect_stack(1, |d| {
        let names = d.names();
        (names.name.map(|s| s.into_owned()), names.name_what)
    });
    let Some((name, what)) = info else {
        let mut out = format!("bad argument #{narg} (").into_bytes();
        out.extend_from_slice(msg);
        out.push(b')');
        return out;
    };
    if what == Some("method") {
        narg -= 1;
        if narg == 0 {
            let mut out = format!("calling '{}' on bad self (", name.as_deref().unwrap_or("?")).into_bytes();
            out.extend_from_slice(msg);
            out.push(b')');
            return out;
        }
    }
    let name = match name {
        Some(n) => n,
        None => {
            // A C function called in a tail call still gets its name from the calling
            // instruction; our closure loses it, so use the field name then.
            let tail = lua.inspect_stack(2, |d| d.source().what == "tail").unwrap_or(false);
            if tail {
                default_name.to_string()
            } else {
                "?".to_string()
            }
        }
    };
    let mut out = format!("bad argument #{narg} to '{name}' (").into_bytes();
    out.extend_from_slice(msg);
    out.push(b')');
    out
}

/// Creates a library function named `name` from its Rust implementation.
pub(crate) fn make_fn<F>(lua: &Lua, name: &'static str, f: F) -> mlua::Result<Function>
where
    F: Fn(&Lua, &Args) -> LibResult<Returns> + Send + 'static,
{
    let imp = lua.create_function(move |lua, mv: MultiValue| {
        let args = Args::new(mv);
        match f(lua, &args) {
            Ok(r) => Ok(r.into_multi()),
            Err(LibError::Runtime(msg)) => {
                let mut text = where_prefix(lua);
                text.extend_from_slice(&msg);
                Ok(MultiValue::from_vec(vec![Value::Boolean(false), Value::String(lua.create_string(text)?)]))
            }
            Err(LibError::Arg(narg, msg)) => {
                let mut text = where_prefix(lua);
                text.extend_from_slice(&arg_error_text(lua, name, narg, &msg));
                Ok(MultiValue::from_vec(vec![Value::Boolean(false), Value::String(lua.create_string(text)?)]))
            }
            Err(LibError::Raw(msg)) => {
                Ok(MultiValue::from_vec(vec![Value::Boolean(false), Value::String(lua.create_string(msg)?)]))
            }
            Err(LibError::Lua(e)) => Err(e),
        }
    })?;
    let reg = registry(lua)?;
    let factory: Function = reg.raw_get("factory")?;
    let unpack: Function = reg.raw_get("unpack")?;
    let error: Function = reg.raw_get("error")?;
    let select: Function = reg.raw_get("select")?;
    factory.call((imp, unpack, error, select, Value::LightUserData(packed_mark())))
}

/// Sets `table[name]` to a library function.
pub(crate) fn add_fn<F>(lua: &Lua, table: &Table, name: &'static str, f: F) -> mlua::Result<()>
where
    F: Fn(&Lua, &Args) -> LibResult<Returns> + Send + 'static,
{
    table.raw_set(name, make_fn(lua, name, f)?)
}

/// Keeps the ancestors of the innermost container of a nested structure being built or walked in
/// a Lua table, so only the innermost one is referenced from Rust (see the module docs). The table
/// is made on first use.
#[derive(Debug, Default)]
pub(crate) struct Spine {
    slots: Option<Table>,
}

impl Spine {
    pub(crate) fn new() -> Self {
        Spine::default()
    }

    /// Saves `a` and `b` for level `depth`.
    pub(crate) fn save(&mut self, lua: &Lua, depth: usize, a: Value, b: Value) -> mlua::Result<()> {
        let slots = match &self.slots {
            Some(t) => t,
            None => self.slots.insert(lua.create_table()?),
        };
        slots.raw_set(2 * depth + 1, a)?;
        slots.raw_set(2 * depth + 2, b)
    }

    /// Takes back what was saved for level `depth`.
    pub(crate) fn take(&self, depth: usize) -> mlua::Result<(Value, Value)> {
        let Some(slots) = &self.slots else {
            return Ok((Value::Nil, Value::Nil));
        };
        let a: Value = slots.raw_get(2 * depth + 1)?;
        let b: Value = slots.raw_get(2 * depth + 2)?;
        slots.raw_set(2 * depth + 1, Value::Nil)?;
        slots.raw_set(2 * depth + 2, Value::Nil)?;
        Ok((a, b))
    }
}

#[cfg(test)]
pub(crate) mod test_util {
    use mlua::Lua;

    /// A Lua state with the four libraries.
    pub(crate) fn lua() -> Lua {
        let lua = Lua::new();
        let opened = super::open_all(&lua);
        assert!(opened.is_ok(), "open_all: {opened:?}");
        lua
    }

    /// Runs `code` and renders what it returns (or the error message) as text.
    pub(crate) fn run(lua: &Lua, code: &str) -> String {
        let f = lua.load(format!("return pcall(function() {code} end)")).set_name("=test").eval::<mlua::MultiValue>();
        match f {
            Err(e) => format!("LOADERR {e}"),
            Ok(mv) => {
                let mut parts = Vec::new();
                for v in mv.iter() {
                    parts.push(render(v));
                }
                parts.join(" ")
            }
        }
    }

    /// The bytes the Lua expression `expr` gives, in hex (as `run` renders results).
    pub(crate) fn hex(lua: &Lua, expr: &str) -> String {
        run(
            lua,
            &format!("local e = {expr} local h = '' for i = 1, #e do h = h .. string.format('%02x', string.byte(e, i)) end return h"),
        )
    }

    fn render(v: &mlua::Value) -> String {
        match v {
            mlua::Value::String(s) => String::from_utf8_lossy(&s.as_bytes()).into_owned(),
            mlua::Value::Integer(i) => i.to_string(),
            mlua::Value::Number(n) => format!("{n}"),
            mlua::Value::Boolean(b) => b.to_string(),
            mlua::Value::Nil => "nil".to_string(),
            other => other.type_name().to_string(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::test_util::{lua, run};

    #[test]
    fn globals_exist() {
        let lua = lua();
        assert_eq!(
            run(&lua, "return type(bit), type(cjson), type(cmsgpack), type(struct)"),
            "true table table table table"
        );
    }

    #[test]
    fn errors_are_strings_without_position() {
        let lua = lua();
        assert_eq!(
            run(&lua, "local ok, e = pcall(cjson.decode, 'x') return type(e), e"),
            "true string Expected value but found invalid token at character 1"
        );
    }

    #[test]
    fn argument_errors_name_the_function_as_called() {
        let lua = lua();
        assert_eq!(run(&lua, "return bit.tobit(nil)"), "false bad argument #1 to 'tobit' (number expected, got nil)");
        assert_eq!(
            run(&lua, "local f = bit.tobit local x = f(nil) return x"),
            "false test:1: bad argument #1 to 'f' (number expected, got nil)"
        );
        assert_eq!(
            run(&lua, "local ok, e = pcall(bit.tobit) return e"),
            "true bad argument #1 to '?' (number expected, got no value)"
        );
    }

    #[test]
    fn many_arguments_and_results() {
        let lua = lua();
        assert_eq!(run(&lua, "local t = {} for i = 1, 5000 do t[i] = 1 end return bit.band(unpack(t))"), "true 1");
        assert_eq!(run(&lua, "return select('#', cmsgpack.unpack(string.rep('\\1', 7999)))"), "true 7999");
    }

    #[test]
    fn c_casts() {
        assert_eq!(super::c_f64_to_i32(1e10), i32::MIN);
        assert_eq!(super::c_f64_to_i32(-3.7), -3);
        assert_eq!(super::c_f64_to_i64(f64::NAN), i64::MIN);
        assert_eq!(super::c_f64_to_u64(1e20), 0);
        assert_eq!(super::c_f64_to_u64(-1.0), u64::MAX);
    }
}
