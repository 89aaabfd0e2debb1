/// The commands syncnode's Redis-protocol endpoint answers, with what `COMMAND` reports of
/// each (arity as Redis counts it: the name included, negative for "at least"), and the
/// commands it refuses with the reason (docs/operations.md, "The Redis protocol").
enum RESPCommand: Int, CaseIterable {
    case get, set, setnx, getset, getdel, mget, mset, del, unlink, exists, type, scan, keys, dbsize
    case incr, incrby, decr, decrby
    case sadd, srem, smembers, sismember, smismember, scard
    case hset, hmset, hsetnx, hdel, hincrby, hget, hmget, hgetall, hkeys, hvals, hlen, hexists
    case zadd, zrem, zscore, zmscore, zcard, zcount, zrank, zrevrank, zrange, zrangebyscore, zrevrange, zrevrangebyscore
    case expire, pexpire, expireat, pexpireat, persist, ttl, pttl, expiretime, pexpiretime, setex, psetex, wait
    case ping, echo, hello, auth, select, quit, reset, client, command, info, config, time
    case multi, exec, discard, unwatch
    case subscribe, unsubscribe, psubscribe, punsubscribe
    case decidePut, decideGet, decideDelete, decideStatus, decideDump, decideForget, decideLease, decideRelease, decideRekey
    case decideChanges, decideSnapshot

    struct Info {
        let name: String
        let arity: Int
        let flags: [String]
        let firstKey: Int
        let lastKey: Int
        let step: Int
        /// Allowed before AUTH (when a password is set).
        var beforeAuth = false
        /// Allowed while a RESP2 client is subscribed.
        var whileSubscribed = false
        /// Writes: answered off the loop when the node waits for the disk.
        var writes = false
    }

    /// What COMMAND reports of this command, and the checks before it runs. The checks read
    /// their field in place: a copy of the whole `Info` retained and released its name and
    /// flags, several times a request.
    var info: Info { Self.infos[rawValue] }
    var name: String { Self.infos[rawValue].name }
    var allowedBeforeAuth: Bool { Self.infos[rawValue].beforeAuth }
    var allowedWhileSubscribed: Bool { Self.infos[rawValue].whileSubscribed }
    var writes: Bool { Self.infos[rawValue].writes }

    /// Whether `count` arguments (the name included) fit the arity.
    func accepts(argumentCount count: Int) -> Bool {
        let arity = Self.infos[rawValue].arity
        return arity >= 0 ? count == arity : count >= -arity
    }

    private static let infos: [Info] = allCases.map(\.makeInfo)

    private var makeInfo: Info {
        switch self {
        case .get: return Info(name: "get", arity: 2, flags: ["readonly", "fast"], firstKey: 1, lastKey: 1, step: 1)
        case .set: return Info(name: "set", arity: -3, flags: ["write", "denyoom"], firstKey: 1, lastKey: 1, step: 1, writes: true)
        case .setnx: return Info(name: "setnx", arity: 3, flags: ["write", "denyoom", "fast"], firstKey: 1, lastKey: 1, step: 1, writes: true)
        case .getset: return Info(name: "getset", arity: 3, flags: ["write", "denyoom", "fast"], firstKey: 1, lastKey: 1, step: 1, writes: true)
        case .getdel: return Info(name: "getdel", arity: 2, flags: ["write", "fast"], firstKey: 1, lastKey: 1, step: 1, writes: true)
        case .mget: return Info(name: "mget", arity: -2, flags: ["readonly", "fast"], firstKey: 1, lastKey: -1, step: 1)
        case .mset: return Info(name: "mset", arity: -3, flags: ["write", "denyoom"], firstKey: 1, lastKey: -1, step: 2, writes: true)
        case .del: return Info(name: "del", arity: -2, flags: ["write"], firstKey: 1, lastKey: -1, step: 1, writes: true)
        case .unlink: return Info(name: "unlink", arity: -2, flags: ["write", "fast"], firstKey: 1, lastKey: -1, step: 1, writes: true)
        case .exists: return Info(name: "exists", arity: -2, flags: ["readonly", "fast"], firstKey: 1, lastKey: -1, step: 1)
        case .type: return Info(name: "type", arity: 2, flags: ["readonly", "fast"], firstKey: 1, lastKey: 1, step: 1)
        case .scan: return Info(name: "scan", arity: -2, flags: ["readonly"], firstKey: 0, lastKey: 0, step: 0)
        case .keys: return Info(name: "keys", arity: 2, flags: ["readonly"], firstKey: 0, lastKey: 0, step: 0)
        case .dbsize: return Info(name: "dbsize", arity: 1, flags: ["readonly", "fast"], firstKey: 0, lastKey: 0, step: 0)
        case .incr: return Info(name: "incr", arity: 2, flags: ["write", "denyoom", "fast"], firstKey: 1, lastKey: 1, step: 1, writes: true)
        case .incrby: return Info(name: "incrby", arity: 3, flags: ["write", "denyoom", "fast"], firstKey: 1, lastKey: 1, step: 1, writes: true)
        case .decr: return Info(name: "decr", arity: 2, flags: ["write", "denyoom", "fast"], firstKey: 1, lastKey: 1, step: 1, writes: true)
        case .decrby: return Info(name: "decrby", arity: 3, flags: ["write", "denyoom", "fast"], firstKey: 1, lastKey: 1, step: 1, writes: true)
        case .sadd: return Info(name: "sadd", arity: -3, flags: ["write", "denyoom", "fast"], firstKey: 1, lastKey: 1, step: 1, writes: true)
        case .srem: return Info(name: "srem", arity: -3, flags: ["write", "fast"], firstKey: 1, lastKey: 1, step: 1, writes: true)
        case .smembers: return Info(name: "smembers", arity: 2, flags: ["readonly"], firstKey: 1, lastKey: 1, step: 1)
        case .sismember: return Info(name: "sismember", arity: 3, flags: ["readonly", "fast"], firstKey: 1, lastKey: 1, step: 1)
        case .smismember: return Info(name: "smismember", arity: -3, flags: ["readonly", "fast"], firstKey: 1, lastKey: 1, step: 1)
        case .scard: return Info(name: "scard", arity: 2, flags: ["readonly", "fast"], firstKey: 1, lastKey: 1, step: 1)
        case .hset: return Info(name: "hset", arity: -4, flags: ["write", "denyoom", "fast"], firstKey: 1, lastKey: 1, step: 1, writes: true)
        case .hmset: return Info(name: "hmset", arity: -4, flags: ["write", "denyoom", "fast"], firstKey: 1, lastKey: 1, step: 1, writes: true)
        case .hsetnx: return Info(name: "hsetnx", arity: 4, flags: ["write", "denyoom", "fast"], firstKey: 1, lastKey: 1, step: 1, writes: true)
        case .hincrby: return Info(name: "hincrby", arity: 4, flags: ["write", "denyoom", "fast"], firstKey: 1, lastKey: 1, step: 1, writes: true)
        case .hdel: return Info(name: "hdel", arity: -3, flags: ["write", "fast"], firstKey: 1, lastKey: 1, step: 1, writes: true)
        case .hget: return Info(name: "hget", arity: 3, flags: ["readonly", "fast"], firstKey: 1, lastKey: 1, step: 1)
        case .hmget: return Info(name: "hmget", arity: -3, flags: ["readonly", "fast"], firstKey: 1, lastKey: 1, step: 1)
        case .hgetall: return Info(name: "hgetall", arity: 2, flags: ["readonly"], firstKey: 1, lastKey: 1, step: 1)
        case .hkeys: return Info(name: "hkeys", arity: 2, flags: ["readonly"], firstKey: 1, lastKey: 1, step: 1)
        case .hvals: return Info(name: "hvals", arity: 2, flags: ["readonly"], firstKey: 1, lastKey: 1, step: 1)
        case .hlen: return Info(name: "hlen", arity: 2, flags: ["readonly", "fast"], firstKey: 1, lastKey: 1, step: 1)
        case .hexists: return Info(name: "hexists", arity: 3, flags: ["readonly", "fast"], firstKey: 1, lastKey: 1, step: 1)
        case .expire: return Info(name: "expire", arity: -3, flags: ["write", "fast"], firstKey: 1, lastKey: 1, step: 1, writes: true)
        case .pexpire: return Info(name: "pexpire", arity: -3, flags: ["write", "fast"], firstKey: 1, lastKey: 1, step: 1, writes: true)
        case .expireat: return Info(name: "expireat", arity: -3, flags: ["write", "fast"], firstKey: 1, lastKey: 1, step: 1, writes: true)
        case .pexpireat: return Info(name: "pexpireat", arity: -3, flags: ["write", "fast"], firstKey: 1, lastKey: 1, step: 1, writes: true)
        case .persist: return Info(name: "persist", arity: 2, flags: ["write", "fast"], firstKey: 1, lastKey: 1, step: 1, writes: true)
        case .ttl: return Info(name: "ttl", arity: 2, flags: ["readonly", "fast"], firstKey: 1, lastKey: 1, step: 1)
        case .pttl: return Info(name: "pttl", arity: 2, flags: ["readonly", "fast"], firstKey: 1, lastKey: 1, step: 1)
        case .expiretime: return Info(name: "expiretime", arity: 2, flags: ["readonly", "fast"], firstKey: 1, lastKey: 1, step: 1)
        case .pexpiretime: return Info(name: "pexpiretime", arity: 2, flags: ["readonly", "fast"], firstKey: 1, lastKey: 1, step: 1)
        case .setex: return Info(name: "setex", arity: 4, flags: ["write", "denyoom"], firstKey: 1, lastKey: 1, step: 1, writes: true)
        case .psetex: return Info(name: "psetex", arity: 4, flags: ["write", "denyoom"], firstKey: 1, lastKey: 1, step: 1, writes: true)
        case .zadd: return Info(name: "zadd", arity: -4, flags: ["write", "denyoom", "fast"], firstKey: 1, lastKey: 1, step: 1, writes: true)
        case .zrem: return Info(name: "zrem", arity: -3, flags: ["write", "fast"], firstKey: 1, lastKey: 1, step: 1, writes: true)
        case .zscore: return Info(name: "zscore", arity: 3, flags: ["readonly", "fast"], firstKey: 1, lastKey: 1, step: 1)
        case .zmscore: return Info(name: "zmscore", arity: -3, flags: ["readonly", "fast"], firstKey: 1, lastKey: 1, step: 1)
        case .zcard: return Info(name: "zcard", arity: 2, flags: ["readonly", "fast"], firstKey: 1, lastKey: 1, step: 1)
        case .zcount: return Info(name: "zcount", arity: 4, flags: ["readonly", "fast"], firstKey: 1, lastKey: 1, step: 1)
        case .zrank: return Info(name: "zrank", arity: -3, flags: ["readonly", "fast"], firstKey: 1, lastKey: 1, step: 1)
        case .zrevrank: return Info(name: "zrevrank", arity: -3, flags: ["readonly", "fast"], firstKey: 1, lastKey: 1, step: 1)
        case .zrange: return Info(name: "zrange", arity: -4, flags: ["readonly"], firstKey: 1, lastKey: 1, step: 1)
        case .zrangebyscore: return Info(name: "zrangebyscore", arity: -4, flags: ["readonly"], firstKey: 1, lastKey: 1, step: 1)
        case .zrevrange: return Info(name: "zrevrange", arity: -4, flags: ["readonly"], firstKey: 1, lastKey: 1, step: 1)
        case .zrevrangebyscore: return Info(name: "zrevrangebyscore", arity: -4, flags: ["readonly"], firstKey: 1, lastKey: 1, step: 1)
        case .wait: return Info(name: "wait", arity: 3, flags: ["noscript"], firstKey: 0, lastKey: 0, step: 0)
        case .ping: return Info(name: "ping", arity: -1, flags: ["fast"], firstKey: 0, lastKey: 0, step: 0, whileSubscribed: true)
        case .echo: return Info(name: "echo", arity: 2, flags: ["fast"], firstKey: 0, lastKey: 0, step: 0)
        case .hello: return Info(name: "hello", arity: -1, flags: ["noscript", "loading", "stale", "fast", "no_auth"], firstKey: 0, lastKey: 0, step: 0, beforeAuth: true)
        case .auth: return Info(name: "auth", arity: -2, flags: ["noscript", "loading", "stale", "fast", "no_auth"], firstKey: 0, lastKey: 0, step: 0, beforeAuth: true)
        case .select: return Info(name: "select", arity: 2, flags: ["loading", "stale", "fast"], firstKey: 0, lastKey: 0, step: 0)
        case .quit: return Info(name: "quit", arity: -1, flags: ["loading", "stale", "fast", "no_auth"], firstKey: 0, lastKey: 0, step: 0, beforeAuth: true, whileSubscribed: true)
        case .reset: return Info(name: "reset", arity: 1, flags: ["loading", "stale", "fast", "no_auth"], firstKey: 0, lastKey: 0, step: 0, beforeAuth: true, whileSubscribed: true)
        case .client: return Info(name: "client", arity: -2, flags: ["loading", "stale"], firstKey: 0, lastKey: 0, step: 0)
        case .command: return Info(name: "command", arity: -1, flags: ["loading", "stale"], firstKey: 0, lastKey: 0, step: 0)
        case .info: return Info(name: "info", arity: -1, flags: ["loading", "stale"], firstKey: 0, lastKey: 0, step: 0)
        case .config: return Info(name: "config", arity: -2, flags: ["loading", "stale"], firstKey: 0, lastKey: 0, step: 0)
        case .time: return Info(name: "time", arity: 1, flags: ["loading", "stale", "fast"], firstKey: 0, lastKey: 0, step: 0)
        case .multi: return Info(name: "multi", arity: 1, flags: ["noscript", "loading", "stale", "fast", "allow_busy"], firstKey: 0, lastKey: 0, step: 0)
        case .exec: return Info(name: "exec", arity: 1, flags: ["noscript", "loading", "stale", "skip_slowlog"], firstKey: 0, lastKey: 0, step: 0)
        case .discard: return Info(name: "discard", arity: 1, flags: ["noscript", "loading", "stale", "fast", "allow_busy"], firstKey: 0, lastKey: 0, step: 0)
        case .unwatch: return Info(name: "unwatch", arity: 1, flags: ["noscript", "loading", "stale", "fast", "allow_busy"], firstKey: 0, lastKey: 0, step: 0)
        case .subscribe: return Info(name: "subscribe", arity: -2, flags: ["pubsub", "noscript", "loading", "stale"], firstKey: 0, lastKey: 0, step: 0, whileSubscribed: true)
        case .unsubscribe: return Info(name: "unsubscribe", arity: -1, flags: ["pubsub", "noscript", "loading", "stale"], firstKey: 0, lastKey: 0, step: 0, whileSubscribed: true)
        case .psubscribe: return Info(name: "psubscribe", arity: -2, flags: ["pubsub", "noscript", "loading", "stale"], firstKey: 0, lastKey: 0, step: 0, whileSubscribed: true)
        case .punsubscribe: return Info(name: "punsubscribe", arity: -1, flags: ["pubsub", "noscript", "loading", "stale"], firstKey: 0, lastKey: 0, step: 0, whileSubscribed: true)
        case .decidePut: return Info(name: "decide.put", arity: -3, flags: ["write", "denyoom"], firstKey: 1, lastKey: 1, step: 1, writes: true)
        case .decideGet: return Info(name: "decide.get", arity: 2, flags: ["readonly", "fast"], firstKey: 1, lastKey: 1, step: 1)
        case .decideDelete: return Info(name: "decide.delete", arity: 2, flags: ["write"], firstKey: 1, lastKey: 1, step: 1, writes: true)
        case .decideStatus: return Info(name: "decide.status", arity: 1, flags: ["readonly", "loading", "stale"], firstKey: 0, lastKey: 0, step: 0)
        case .decideDump: return Info(name: "decide.dump", arity: 1, flags: ["readonly"], firstKey: 0, lastKey: 0, step: 0)
        case .decideForget: return Info(name: "decide.forget", arity: 2, flags: ["admin"], firstKey: 0, lastKey: 0, step: 0)
        case .decideLease: return Info(name: "decide.lease", arity: -3, flags: ["write"], firstKey: 0, lastKey: 0, step: 0)
        case .decideRelease: return Info(name: "decide.release", arity: 3, flags: ["write"], firstKey: 0, lastKey: 0, step: 0)
        case .decideRekey: return Info(name: "decide.rekey", arity: 1, flags: ["admin"], firstKey: 0, lastKey: 0, step: 0)
        case .decideChanges: return Info(name: "decide.changes", arity: -2, flags: ["readonly", "blocking"], firstKey: 0, lastKey: 0, step: 0)
        case .decideSnapshot: return Info(name: "decide.snapshot", arity: -1, flags: ["readonly"], firstKey: 0, lastKey: 0, step: 0)
        }
    }

    /// Command names (upper-cased bytes packed into 128 bits) to commands.
    private static let byName: [UInt128: RESPCommand] = {
        var table: [UInt128: RESPCommand] = [:]
        for command in allCases { table[pack(command.info.name.utf8)!] = command }
        return table
    }()

    /// The command named `name` (any case), nil when unknown: a parsed argument, or one seen
    /// ahead in the parser's buffer (`RESPRequestParser.peekCommands`).
    static func named<Name: RandomAccessCollection<UInt8>>(_ name: Name) -> RESPCommand? where Name.Index == Int {
        // The two commands of nearly every request, without a table lookup.
        if name.count == 3 {
            let a = name[name.startIndex] | 0x20, b = name[name.startIndex + 1] | 0x20, c = name[name.startIndex + 2] | 0x20
            if b == UInt8(ascii: "e") && c == UInt8(ascii: "t") {
                if a == UInt8(ascii: "g") { return .get }
                if a == UInt8(ascii: "s") { return .set }
            }
        }
        guard let key = pack(name) else { return nil }
        return byName[key]
    }

    /// Up to 16 bytes, lower-cased, packed; nil when longer.
    private static func pack(_ bytes: some Collection<UInt8>) -> UInt128? {
        guard bytes.count <= 16 else { return nil }
        var packed: UInt128 = 0
        for byte in bytes {
            let lower = (byte >= UInt8(ascii: "A") && byte <= UInt8(ascii: "Z")) ? byte | 0x20 : byte
            packed = packed << 8 | UInt128(lower)
        }
        return packed | UInt128(bytes.count) << 120
    }

    /// Commands Decide refuses, with why: last-writer-wins cannot keep their meaning, or the
    /// feature is not built yet. Keyed by lower-case name.
    static let refused: [String: String] = {
        var reasons: [String: String] = [:]
        reasons["incrbyfloat"] = "a counter here sums whole numbers exactly across nodes (INCRBY); summing floating-point changes made on different nodes in different orders would not give every node the same total to the last bit"
        let part = "under last-writer-wins two nodes changing parts of one string at once would lose one change; compute the whole new value and SET it"
        for name in ["append", "setrange", "setbit", "bitfield"] {
            reasons[name] = part
        }
        let structure = "Decide values are whole JSON documents replaced last-writer-wins, so two nodes changing one list at once would lose one change; store one key per item instead (NAME[ID]), or use a set (SADD), hash (HSET) or sorted set (ZADD), which keep concurrent changes"
        for name in ["lpush", "rpush", "lpushx", "rpushx", "lpop", "rpop", "linsert", "lset", "lrem", "ltrim", "lmove", "rpoplpush",
                     "blpop", "brpop", "blmove", "lrange", "llen", "lindex",
                     "pfadd", "pfmerge", "xadd", "xdel", "xtrim", "geoadd"] {
            reasons[name] = structure
        }
        let setPart = "a set here is observed-remove (docs/consistency.md, \"Sets\"): an insert no remove had seen stays; taking a member at random (SPOP, SRANDMEMBER) or moving one between sets (SMOVE) on two nodes at once could hand the same member to both, so read with SMEMBERS and SREM what you take"
        for name in ["spop", "smove"] {
            reasons[name] = setPart
        }
        reasons["hincrbyfloat"] = "a hash field's counter here sums whole numbers exactly across nodes (HINCRBY); summing floating-point changes made on different nodes in different orders would not give every node the same total to the last bit"
        for name in ["hscan", "hrandfield", "hstrlen"] {
            reasons[name] = "not built yet: read the hash with HGETALL"
        }
        let setAlgebra = "not built yet: read the sets with SMEMBERS and combine them in the client"
        for name in ["sinter", "sunion", "sdiff", "sinterstore", "sunionstore", "sdiffstore", "sintercard", "sscan", "srandmember"] {
            reasons[name] = setAlgebra
        }
        reasons["zincrby"] = "a score here is one value replaced last-writer-wins per member, so two nodes adding to one score at once would lose one change; keep an amount that must add up in a counter (INCRBY), and ZADD the score you computed"
        let pop = "a sorted set here is replaced last-writer-wins per member: taking the lowest or highest member (ZPOPMIN, ZPOPMAX, BZPOP*) on two nodes at once could hand the same member to both; read with ZRANGE and ZREM what you take"
        for name in ["zpopmin", "zpopmax", "bzpopmin", "bzpopmax", "zmpop", "bzmpop"] {
            reasons[name] = pop
        }
        for name in ["zrangebylex", "zrevrangebylex", "zlexcount", "zremrangebylex", "zremrangebyrank", "zremrangebyscore", "zrangestore",
                     "zunion", "zinter", "zdiff", "zunionstore", "zinterstore", "zdiffstore", "zintercard", "zscan", "zrandmember"] {
            reasons[name] = "not built yet: read the sorted set with ZRANGE (by rank or BYSCORE) and ZREM or ZADD what you change"
        }
        let script = "a decision is Decide's unit of atomicity: MULTI … EXEC (or MSET) runs several commands as one decision, applied whole on every node"
        for name in ["eval", "evalsha", "eval_ro", "fcall", "function", "script"] {
            reasons[name] = script
        }
        reasons["watch"] = "a check that no other client changed a key before EXEC needs one server to order every write, and every replica here accepts writes; use MULTI … EXEC (one decision) with SET NX / XX, judged on this node"
        reasons["getex"] = "not offered: read with GET, then renew with EXPIRE or PERSIST (each a write that replicates)"
        reasons["waitaof"] = "there is no append-only file: WAIT counts the peers that applied the writes at their own durability level (docs/consistency.md)"
        reasons["publish"] = "channels here carry keyspace notifications of Decide's changes only; publish by writing a key"
        reasons["flushall"] = "deleting every key is not offered as one command: DEL keys in batches (each delete replicates like a write)"
        reasons["flushdb"] = reasons["flushall"]
        reasons["rename"] = "a key's name is its identity on every node; write the value under the new name and DEL the old one (MSET and DEL, or one decision in code)"
        reasons["renamenx"] = reasons["rename"]
        reasons["move"] = "syncnode has one database (0)"
        reasons["swapdb"] = reasons["move"]
        return reasons
    }()
}
