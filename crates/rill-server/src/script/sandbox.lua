-- rill's script sandbox, run once in each new Lua VM after the libraries are loaded.
--
-- Scripts see the globals through `env`, a table with nothing in it: reading a name looks it up
-- in the real globals and fails for a name that is not there; assigning one fails. Every
-- library table reachable from the globals is replaced by a read-only view of itself, and
-- setmetatable/rawset refuse the views, so a script cannot change what the next script sees.
-- The views are empty tables, so the functions that read a table raw (pairs, next, ipairs,
-- rawget) are given the table behind a view.
-- The Rust side (`vm.rs`) passes the functions it wrote in Rust; this chunk returns the
-- environment, the runner and the `redis` table (where Rust puts redis.call and the other
-- functions that reach the server, for the length of one run).
local rust = ...

local G = _G
local error_, type_, tostring_, select_, unpack_ = error, type, tostring, select, unpack
local rawget_, rawset_, next_ = rawget, rawset, next
local setmetatable_, getmetatable_ = setmetatable, getmetatable
local pcall_, xpcall_, loadstring_, load_, setfenv_ = pcall, xpcall, loadstring, load, setfenv

local READONLY = 'Attempt to modify a readonly table'
local readonly = setmetatable_({}, { __mode = 'k' })
-- The table behind each read-only view (pairs, next, ipairs and rawget see through a view).
local backing = setmetatable_({}, { __mode = 'k' })

local function deny()
    error_(READONLY, 2)
end

-- A read-only view of `t`: reads go to `t`, writes fail, its metatable is a view too.
local function view(t)
    local mt = { __index = t, __newindex = deny }
    local proxy = setmetatable_({}, mt)
    local mtview = setmetatable_({}, { __index = mt, __newindex = deny, __metatable = false })
    readonly[mtview] = true
    backing[mtview] = mt
    mt.__metatable = mtview
    readonly[proxy] = true
    backing[proxy] = t
    return proxy
end

local function protect(t)
    for k, v in next_, t do
        if type_(v) == 'table' and not readonly[v] and v ~= G then
            rawset_(t, k, protect(v))
        end
    end
    return view(t)
end

-- A missing global fails at the place of the script's read (the function that read it, one
-- level above the `__index` that raises).
local function missing(_, k)
    error_("Script attempted to access nonexistent global variable '" .. tostring_(k) .. "'", 2)
end

-- `t[k]`, or the error `missing` raises, for an `__index` function of its own (two levels
-- above this function: the script's read).
local function global_of(t, k)
    local v = rawget_(t, k)
    if v == nil then
        error_("Script attempted to access nonexistent global variable '" .. tostring_(k) .. "'", 3)
    end
    return v
end

-- The environment scripts run in: an empty table whose reads go to the globals (or, while
-- FUNCTION LOAD runs a library's code, to the library API: `set_loading`) by a table
-- `__index`, which Lua follows without a call; a name the globals lack reaches their own
-- `__index`, `missing`. Its metatable shows as a read-only view that does not hand out the
-- globals themselves.
local envmt = {
    __index = G,
    __newindex = deny,
}
local envmtview = setmetatable_({}, {
    __index = {
        __index = function(_, k)
            return envmt.__index[k]
        end,
        __newindex = deny,
    },
    __newindex = deny,
    __metatable = false,
})
readonly[envmtview] = true
envmt.__metatable = envmtview
local env = setmetatable_({}, envmt)
readonly[env] = true

local function pack(...)
    return { n = select_('#', ...), ... }
end

-- Redis' pcall: an error that is a table with an `err` text gives that text.
local function script_pcall(f, ...)
    local r = pack(pcall_(f, ...))
    if not r[1] then
        local e = r[2]
        if type_(e) == 'table' then
            local text = e.err
            if type_(text) == 'string' or type_(text) == 'number' then
                return false, text
            end
        elseif type_(e) == 'userdata' then
            -- An error table raised by Rust (redis.call and kin) travels as userdata.
            local text = rust.raised_text(e)
            if text then
                return false, text
            end
        end
        return false, e
    end
    return unpack_(r, 1, r.n)
end

local function refuse_binary(chunk)
    return type_(chunk) == 'string' and chunk:byte(1) == 27
end

local function script_loadstring(chunk, name)
    if refuse_binary(chunk) then
        return nil, 'binary chunks are not accepted'
    end
    local f, err = loadstring_(chunk, name)
    if f then
        setfenv_(f, env)
    end
    return f, err
end

local function script_load(fn, name)
    local parts = {}
    if type_(fn) == 'function' then
        while true do
            local piece = fn()
            if piece == nil or piece == '' then
                break
            end
            parts[#parts + 1] = piece
        end
        fn = table.concat(parts)
    end
    return script_loadstring(fn, name)
end

-- setmetatable and rawset refuse the read-only tables (Rust functions, so that the error has
-- no place of its own and points at the script's line, as Redis' does).
local script_setmetatable, script_rawset = rust.guards(readonly, setmetatable_, rawset_)

-- redis.call, pcall, setresp, set_repl and acl_check_cmd are Rust functions Rust puts here
-- (call and pcall reach the server through the host of the run in progress).
local redis = {}

local function push_error(text)
    -- Redis' rule for an error given with or without its leading '-' and code.
    local code, msg
    if text:sub(1, 1) == '-' then
        local space = text:find(' ', 1, true)
        if space then
            code, msg = text:sub(2, space - 1), text:sub(space + 1)
        else
            code, msg = 'ERR', text:sub(2)
        end
    else
        code, msg = 'ERR', text
    end
    msg = msg:gsub('^[\r\n]+', ''):gsub('[\r\n]+$', '')
    return { err = code .. ' ' .. msg }
end

redis.error_reply = function(...)
    local e = ...
    if select_('#', ...) ~= 1 or type_(e) ~= 'string' then
        return push_error('wrong number or type of arguments')
    end
    if e:sub(1, 1) ~= '-' then
        e = '-' .. e
    end
    return push_error(e)
end

redis.status_reply = function(...)
    local s = ...
    if select_('#', ...) ~= 1 or type_(s) ~= 'string' then
        return push_error('wrong number or type of arguments')
    end
    return { ok = s }
end

redis.sha1hex = rust.sha1hex
redis.log = rust.log

redis.breakpoint = function()
    return false
end
redis.debug = function() end
redis.replicate_commands = function()
    return true
end

redis.LOG_DEBUG, redis.LOG_VERBOSE, redis.LOG_NOTICE, redis.LOG_WARNING = 0, 1, 2, 3
redis.REPL_NONE, redis.REPL_AOF, redis.REPL_SLAVE, redis.REPL_REPLICA, redis.REPL_ALL = 0, 1, 2, 2, 3
redis.REDIS_VERSION, redis.REDIS_VERSION_NUM = rust.version, rust.version_num

math.random = rust.random
math.randomseed = rust.randomseed

-- The globals scripts may see, as Redis keeps them (of `os`, only the clock).
G.os = { clock = os.clock }
G.redis = redis
G.pcall = script_pcall
do
    -- unpack with its range checked first, in doubles (the C one's `j - i + 1` overflows
    -- for extreme indexes: CVE-2025-46817), then done by the C one.
    local unpack, tonumber, floor, ceil = unpack_, tonumber, math.floor, math.ceil
    local function int(x)
        x = tonumber(x)
        if x == nil then
            return nil
        end
        if x ~= x or x >= 2147483648 or x < -2147483648 then
            return -2147483648
        end
        return x >= 0 and floor(x) or ceil(x)
    end
    G.unpack = function(...)
        local nargs = select_('#', ...)
        local t, i, j = ...
        if type_(t) ~= 'table' then
            local got = nargs == 0 and 'no value' or type_(t)
            error_("bad argument #1 to 'unpack' (table expected, got " .. got .. ')', 2)
        end
        local first = i == nil and 1 or int(i)
        local last = j == nil and #t or int(j)
        if first == nil or last == nil then
            return unpack(...)
        end
        if first > last then
            return
        end
        if last - first + 1 > 8000 - nargs then
            error_('too many results to unpack', 2)
        end
        -- As many arguments as given: the C one's room is 8000 less its arguments.
        if nargs == 1 then
            return unpack(t)
        elseif nargs == 2 then
            return unpack(t, first)
        end
        return unpack(t, first, last)
    end
end
do
    local next, pairs, ipairs, rawget = next_, pairs, ipairs, rawget_
    G.next = function(t, ...)
        return next(backing[t] or t, ...)
    end
    G.pairs = function(t, ...)
        return pairs(backing[t] or t, ...)
    end
    G.ipairs = function(t, ...)
        return ipairs(backing[t] or t, ...)
    end
    G.rawget = function(t, ...)
        return rawget(backing[t] or t, ...)
    end
end
G.loadstring = script_loadstring
G.load = script_load
G.setmetatable = script_setmetatable
G.rawset = script_rawset
for _, name in ipairs({ 'setfenv', 'getfenv', 'newproxy', 'dofile', 'loadfile', 'print', 'module', 'require',
    'package', 'debug', 'io' }) do
    rawset_(G, name, nil)
end

for k, v in next_, G do
    if type_(v) == 'table' and v ~= G then
        rawset_(G, k, protect(v))
    end
end
rawset_(G, '_G', env)
setmetatable_(G, { __index = missing, __metatable = false })

-- Strings' metatable (the only basic type with one) read-only too.
local smt = getmetatable_('')
if smt then
    smt.__metatable = view(smt)
end

-- The library API: all a library's code sees while FUNCTION LOAD runs it (functions it
-- registers run later, with the globals). A name it lacks fails as a missing global does.
local function strict(t)
    local mt = {
        __index = function(_, k)
            local v = global_of(t, k)
            return v
        end,
        __newindex = deny,
        __metatable = false,
    }
    local proxy = setmetatable_({}, mt)
    readonly[proxy] = true
    backing[proxy] = t
    return proxy
end
local library_api = strict({
    redis = strict({
        register_function = rust.register_function,
        log = rust.log,
        LOG_DEBUG = 0,
        LOG_VERBOSE = 1,
        LOG_NOTICE = 2,
        LOG_WARNING = 3,
        REDIS_VERSION = rust.version,
        REDIS_VERSION_NUM = rust.version_num,
    }),
})
setmetatable_(backing[library_api], { __index = missing })
local function set_loading(on)
    envmt.__index = on and backing[library_api] or G
end

-- Runs `f` in protected mode with the message handler: (true, result) or (false, error).
local function run(f, handler)
    return xpcall_(f, handler)
end

return env, run, redis, readonly, set_loading
