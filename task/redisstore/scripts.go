package redisstore

import "github.com/redis/go-redis/v9"

// Keys, under the store's prefix P (rk is a record's key: the agent's length,
// the agent, the id; o an owner key):
//
//	P t:<rk>      hash of one record: r (encoded record without its times),
//	              v (version), s (state), o (owner key), ob (encoded owner),
//	              np (push configs), c and u (created, updated: µs, server
//	              clock); PEXPIREd TTL after u
//	P s:<state>   zset of the records in the state, by u (count, expiry,
//	              the least recently updated finished record)
//	P ol:<o>      zset of the owner's live records, by u
//	P od:<o>      zset of the owner's finished records, by u
//	P owners      zset of owners by records held (lazily corrected after
//	              expiry: the heaviest is recounted before it is used)
//	P op:<o>      zset of the owner's push configs (<rk>\0<n>), by u
//	P c:<rk>      hash of one context: o, ob; PEXPIREd TTL after its claim
//	P cx          zset of contexts, by claim time
//	P co:<o>      zset of the owner's contexts; P cowners like P owners
//	P tomb        hash rk → encoded owner of evicted records; P tombo rk →
//	              their owner keys; P tombz their order (bounded)
//	P retired     hash block index → 64-byte block of the retired-id set
//	              (task/retired.go); P rlayout its layout: b (blocks), k,
//	              cap (capacity), set by the first write that needs it, so
//	              every replica uses the set as it was made
//	P stats       hash of counters: evicted, expired, violations
//	P seq         the version counter
//	P wp:<kind>   hash id → payload; P wh:<kind> id → holder; P wl:<kind>
//	              zset id → lease end (µs)
//
// Index entries of records and contexts that expired are removed by score
// (u <= now - TTL) before every count, so they never count against a bound.
const prelude = `
local P = ARGV[1]
local TERMINAL = {succeeded=true, cancelled=true, failed=true, rejected=true}
local STATES = {'queued','running','awaiting_input','awaiting_auth','succeeded','cancelled','failed','rejected'}
local FINISHED = {'succeeded','cancelled','failed','rejected'}
local function clock()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000000 + tonumber(t[2])
end
local function tkey(rk) return P .. 't:' .. rk end
local function cls(s) if TERMINAL[s] then return 'od:' end return 'ol:' end
local function prune(cut)
  local n = 0
  for _, s in ipairs(STATES) do
    n = n + redis.call('ZREMRANGEBYSCORE', P .. 's:' .. s, '-inf', cut)
  end
  if n > 0 then redis.call('HINCRBY', P .. 'stats', 'expired', n) end
end
local function total()
  local n = 0
  for _, s in ipairs(STATES) do n = n + redis.call('ZCARD', P .. 's:' .. s) end
  return n
end
local function rank(zkey, o, n)
  if n <= 0 then redis.call('ZREM', zkey, o) else redis.call('ZADD', zkey, n, o) end
end
local function bump(zkey, o, d)
  if tonumber(redis.call('ZINCRBY', zkey, d, o)) <= 0 then redis.call('ZREM', zkey, o) end
end
local function ownerCount(o, cut)
  redis.call('ZREMRANGEBYSCORE', P .. 'od:' .. o, '-inf', cut)
  redis.call('ZREMRANGEBYSCORE', P .. 'ol:' .. o, '-inf', cut)
  redis.call('ZREMRANGEBYSCORE', P .. 'op:' .. o, '-inf', cut)
  local n = redis.call('ZCARD', P .. 'od:' .. o) + redis.call('ZCARD', P .. 'ol:' .. o)
  rank(P .. 'owners', o, n)
  return n
end
local function ctxCount(o, cut)
  redis.call('ZREMRANGEBYSCORE', P .. 'co:' .. o, '-inf', cut)
  local n = redis.call('ZCARD', P .. 'co:' .. o)
  rank(P .. 'cowners', o, n)
  return n
end
local function heaviest(zkey, count, cut)
  for _ = 1, 100 do
    local top = redis.call('ZREVRANGE', zkey, 0, 0, 'WITHSCORES')
    if #top == 0 then return nil end
    if count(top[1], cut) == tonumber(top[2]) then return top[1] end
  end
  return redis.call('ZREVRANGE', zkey, 0, 0)[1]
end
local function oldestOf(o)
  local v = redis.call('ZRANGE', P .. 'od:' .. o, 0, 0)
  if #v == 0 then v = redis.call('ZRANGE', P .. 'ol:' .. o, 0, 0) end
  return v[1]
end
local function finishedOldest()
  local best, score
  for _, s in ipairs(FINISHED) do
    local v = redis.call('ZRANGE', P .. 's:' .. s, 0, 0, 'WITHSCORES')
    if #v > 0 and (score == nil or tonumber(v[2]) < score) then best, score = v[1], tonumber(v[2]) end
  end
  return best
end
local function drop(rk)
  local k = tkey(rk)
  local h = redis.call('HMGET', k, 's', 'o', 'np', 'ob')
  if not h[1] then return nil end
  redis.call('DEL', k)
  local s, o, np = h[1], h[2], tonumber(h[3]) or 0
  redis.call('ZREM', P .. 's:' .. s, rk)
  redis.call('ZREM', P .. cls(s) .. o, rk)
  bump(P .. 'owners', o, -1)
  for i = 1, np do redis.call('ZREM', P .. 'op:' .. o, rk .. '\0' .. i) end
  return h
end
local function evict(rk, reason, maxTombs, out)
  local h = drop(rk)
  if not h then return end
  redis.call('HINCRBY', P .. 'stats', 'evicted', 1)
  local seq = redis.call('INCR', P .. 'seq')
  redis.call('HSET', P .. 'tomb', rk, h[4])
  redis.call('HSET', P .. 'tombo', rk, h[2])
  redis.call('ZADD', P .. 'tombz', seq, rk)
  while redis.call('ZCARD', P .. 'tombz') > maxTombs do
    local old = redis.call('ZPOPMIN', P .. 'tombz')
    redis.call('HDEL', P .. 'tomb', old[1])
    redis.call('HDEL', P .. 'tombo', old[1])
  end
  for _, x in ipairs({rk, h[4], h[1], reason, '0'}) do table.insert(out, x) end
end
-- The retired-id set (task/retired.go): the layout on record, else the one
-- the caller passes (recorded when write is true).
local function layout(b, k, cap, write)
  local cur = redis.call('HMGET', P .. 'rlayout', 'b', 'k')
  if cur[1] then return {tonumber(cur[1]), tonumber(cur[2])} end
  if write then redis.call('HSET', P .. 'rlayout', 'b', b, 'k', k, 'cap', cap) end
  return {tonumber(b), tonumber(k)}
end
-- locate is task.Retired.Locate: the hex stream of SHA-1(key), SHA-1(key ..
-- 0x01), SHA-1(key .. 0x02) for key = kind .. rk; the block from its first 8
-- digits, bit i of k from the 3-digit group after them, modulo 512.
local function locate(kind, rk, L)
  local key = kind .. rk
  local h = redis.sha1hex(key) .. redis.sha1hex(key .. '\1') .. redis.sha1hex(key .. '\2')
  local block = tonumber(string.sub(h, 1, 8), 16) % L[1]
  local bits = {}
  for i = 0, L[2] - 1 do
    local n = 9 + 3 * i
    bits[i + 1] = tonumber(string.sub(h, n, n + 2), 16) % 512
  end
  return string.format('%d', block), bits
end
local function isRetired(kind, rk, L)
  local block, bits = locate(kind, rk, L)
  local blk = redis.call('HGET', P .. 'retired', block)
  if not blk or #blk ~= 64 then return false end
  for _, bit in ipairs(bits) do
    local m = 2 ^ (7 - bit % 8)
    if math.floor(string.byte(blk, math.floor(bit / 8) + 1) / m) % 2 == 0 then return false end
  end
  return true
end
local function retire(kind, rk, L)
  local block, bits = locate(kind, rk, L)
  local blk = redis.call('HGET', P .. 'retired', block)
  local t = {}
  if blk and #blk == 64 then t = {string.byte(blk, 1, 64)} else for i = 1, 64 do t[i] = 0 end end
  local changed = false
  for _, bit in ipairs(bits) do
    local i, m = math.floor(bit / 8) + 1, 2 ^ (7 - bit % 8)
    if math.floor(t[i] / m) % 2 == 0 then t[i] = t[i] + m; changed = true end
  end
  if changed then
    redis.call('HSET', P .. 'retired', block, string.char(unpack(t)))
    redis.call('HINCRBY', P .. 'stats', 'retired', 1)
  end
end
`

// createScript: ARGV P, ttl ms, max tasks, max per owner, max tombstones,
// rk, record, state, owner key, encoded owner, push configs, created µs (0:
// now), the retired-id set's blocks, k and capacity, claim (0/1: ClaimTask).
// Returns {'exists'}, {'retired'} or {'ok', version, created, updated,
// evictions...}.
var createScript = redis.NewScript(prelude + `
local ttl, rk, s, o, np = tonumber(ARGV[2]), ARGV[6], ARGV[8], ARGV[9], tonumber(ARGV[11])
local t = clock()
local cut = t - ttl * 1000
prune(cut)
local k = tkey(rk)
if redis.call('EXISTS', k) == 1 then return {'exists'} end
local L = layout(ARGV[13], ARGV[14], ARGV[15], true)
if ARGV[16] == '1' then
  local was = redis.call('HGET', P .. 'tombo', rk)
  if was then
    if was ~= o then return {'retired'} end
  elseif isRetired('t', rk, L) then
    return {'retired'}
  end
end
local ev = {}
if ownerCount(o, cut) >= tonumber(ARGV[4]) then
  local v = oldestOf(o)
  if v then evict(v, 'owner_full', tonumber(ARGV[5]), ev) end
elseif total() >= tonumber(ARGV[3]) then
  local v = finishedOldest()
  if not v then
    local h = heaviest(P .. 'owners', ownerCount, cut)
    if h then v = oldestOf(h) end
  end
  if v then evict(v, 'store_full', tonumber(ARGV[5]), ev) end
end
local ver = redis.call('INCR', P .. 'seq')
local c = tonumber(ARGV[12])
if c == 0 then c = t end
redis.call('HSET', k, 'r', ARGV[7], 'v', ver, 's', s, 'o', o, 'ob', ARGV[10], 'np', np, 'c', c, 'u', t)
redis.call('PEXPIRE', k, ttl)
redis.call('ZADD', P .. 's:' .. s, t, rk)
redis.call('ZADD', P .. cls(s) .. o, t, rk)
bump(P .. 'owners', o, 1)
for i = 1, np do redis.call('ZADD', P .. 'op:' .. o, t, rk .. '\0' .. i) end
redis.call('HDEL', P .. 'tomb', rk)
redis.call('HDEL', P .. 'tombo', rk)
redis.call('ZREM', P .. 'tombz', rk)
retire('t', rk, L)
local out = {'ok', ver, c, t}
for _, x in ipairs(ev) do table.insert(out, x) end
return out
`)

// putScript writes a record computed from version expect, atomically: if the
// record is no longer at that version it changes nothing and returns the
// current one, so the caller recomputes (compare-and-set; the event itself
// is applied by task.ApplyEvent in Go, one rule for every store).
// ARGV P, ttl ms, rk, expect, record, state, push configs, violation (0/1),
// touch (0/1), max push per owner (0: not checked). Returns {'notfound'},
// {'pushlimit'}, {'conflict', version, record, created, updated} or {'ok',
// version, created, updated}.
var putScript = redis.NewScript(prelude + `
local ttl, rk = tonumber(ARGV[2]), ARGV[3]
local k = tkey(rk)
local h = redis.call('HMGET', k, 'v', 's', 'o', 'np', 'c', 'u', 'r')
if not h[1] then return {'notfound'} end
if tonumber(h[1]) ~= tonumber(ARGV[4]) then return {'conflict', h[1], h[7], h[5], h[6]} end
local old, o, oldnp = h[2], h[3], tonumber(h[4]) or 0
local s, np = ARGV[6], tonumber(ARGV[7])
local t = clock()
local maxp = tonumber(ARGV[10])
if maxp > 0 and np > oldnp then
  redis.call('ZREMRANGEBYSCORE', P .. 'op:' .. o, '-inf', t - ttl * 1000)
  if redis.call('ZCARD', P .. 'op:' .. o) + np - oldnp > maxp then return {'pushlimit'} end
end
if ARGV[9] ~= '1' then t = tonumber(h[6]) end
local ver = redis.call('INCR', P .. 'seq')
redis.call('HSET', k, 'r', ARGV[5], 'v', ver, 's', s, 'np', np, 'u', t)
if ARGV[9] == '1' then redis.call('PEXPIRE', k, ttl) end
if s ~= old then redis.call('ZREM', P .. 's:' .. old, rk) end
redis.call('ZADD', P .. 's:' .. s, t, rk)
if cls(s) ~= cls(old) then redis.call('ZREM', P .. cls(old) .. o, rk) end
redis.call('ZADD', P .. cls(s) .. o, t, rk)
for i = 1, math.max(oldnp, np) do
  if i <= np then redis.call('ZADD', P .. 'op:' .. o, t, rk .. '\0' .. i)
  else redis.call('ZREM', P .. 'op:' .. o, rk .. '\0' .. i) end
end
if ARGV[8] == '1' then redis.call('HINCRBY', P .. 'stats', 'violations', 1) end
return {'ok', ver, h[5], t}
`)

// deleteScript: ARGV P, rk. Returns 1, or 0 for an unknown record.
var deleteScript = redis.NewScript(prelude + `
if drop(ARGV[2]) then return 1 end
return 0
`)

// claimScript: ARGV P, ttl ms, max contexts, max per owner, rk, owner key,
// encoded owner, the retired-id set's blocks, k and capacity. Returns
// {encoded owner on record, evictions...}, or {} for a retired context.
var claimScript = redis.NewScript(prelude + `
local ttl, rk, o = tonumber(ARGV[2]), ARGV[5], ARGV[6]
local t = clock()
local cut = t - ttl * 1000
redis.call('ZREMRANGEBYSCORE', P .. 'cx', '-inf', cut)
local k = P .. 'c:' .. rk
local cur = redis.call('HMGET', k, 'o', 'ob')
if cur[1] then
  if cur[1] == o then
    redis.call('PEXPIRE', k, ttl)
    redis.call('ZADD', P .. 'cx', t, rk)
    redis.call('ZADD', P .. 'co:' .. o, t, rk)
  end
  return {cur[2]}
end
local L = layout(ARGV[8], ARGV[9], ARGV[10], true)
if isRetired('c', rk, L) then return {} end
local out = {ARGV[7]}
local function evictCtx(v, reason)
  if not v then return end
  local ck = P .. 'c:' .. v
  local h = redis.call('HMGET', ck, 'o', 'ob')
  redis.call('DEL', ck)
  redis.call('ZREM', P .. 'cx', v)
  if h[1] then
    redis.call('ZREM', P .. 'co:' .. h[1], v)
    bump(P .. 'cowners', h[1], -1)
    redis.call('HINCRBY', P .. 'stats', 'evicted', 1)
    for _, x in ipairs({v, h[2], '', reason, '1'}) do table.insert(out, x) end
  end
end
if ctxCount(o, cut) >= tonumber(ARGV[4]) then
  evictCtx(redis.call('ZRANGE', P .. 'co:' .. o, 0, 0)[1], 'owner_full')
elseif redis.call('ZCARD', P .. 'cx') >= tonumber(ARGV[3]) then
  local hv = heaviest(P .. 'cowners', ctxCount, cut)
  if hv then evictCtx(redis.call('ZRANGE', P .. 'co:' .. hv, 0, 0)[1], 'store_full') end
end
redis.call('HSET', k, 'o', o, 'ob', ARGV[7])
redis.call('PEXPIRE', k, ttl)
redis.call('ZADD', P .. 'cx', t, rk)
redis.call('ZADD', P .. 'co:' .. o, t, rk)
bump(P .. 'cowners', o, 1)
retire('c', rk, L)
return out
`)

// forgottenScript answers Tombstone and Context for what the store no longer
// holds. ARGV P, kind ('t': a task, 'c': a context), rk, the retired-id set's
// blocks, k and capacity. Returns {'held', encoded owner} (a context's owner,
// or an evicted task's from its tombstone), {'retired'} or {}.
var forgottenScript = redis.NewScript(prelude + `
local kind, rk = ARGV[2], ARGV[3]
local ob
if kind == 'c' then ob = redis.call('HGET', P .. 'c:' .. rk, 'ob')
else ob = redis.call('HGET', P .. 'tomb', rk) end
if ob then return {'held', ob} end
if isRetired(kind, rk, layout(ARGV[4], ARGV[5], ARGV[6], false)) then return {'retired'} end
return {}
`)

// statsScript: ARGV P, ttl ms, the retired-id set's capacity. Returns the
// count of each state (in task.States order), the contexts, evicted,
// expired, violations, retired ids, the set's capacity.
var statsScript = redis.NewScript(prelude + `
local t = clock()
local cut = t - tonumber(ARGV[2]) * 1000
prune(cut)
redis.call('ZREMRANGEBYSCORE', P .. 'cx', '-inf', cut)
local out = {}
for _, s in ipairs(STATES) do table.insert(out, redis.call('ZCARD', P .. 's:' .. s)) end
table.insert(out, redis.call('ZCARD', P .. 'cx'))
local c = redis.call('HMGET', P .. 'stats', 'evicted', 'expired', 'violations', 'retired')
for i = 1, 4 do table.insert(out, tonumber(c[i]) or 0) end
table.insert(out, tonumber(redis.call('HGET', P .. 'rlayout', 'cap') or ARGV[3]))
return out
`)

// The work queue. Lease ends are µs of the server's clock.
const workPrelude = `
local P, kind = ARGV[1], ARGV[2]
local WP, WH, WL = P .. 'wp:' .. kind, P .. 'wh:' .. kind, P .. 'wl:' .. kind
local function clock()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000000 + tonumber(t[2])
end
`

// workPutScript: ARGV P, kind, id, payload, holder, ttl ms, max items.
// Returns 1, or 0 when the queue is full.
var workPutScript = redis.NewScript(workPrelude + `
local id = ARGV[3]
if redis.call('HEXISTS', WP, id) == 0 and redis.call('HLEN', WP) >= tonumber(ARGV[7]) then return 0 end
redis.call('HSET', WP, id, ARGV[4])
redis.call('HSET', WH, id, ARGV[5])
redis.call('ZADD', WL, clock() + math.max(tonumber(ARGV[6]), 0) * 1000, id)
return 1
`)

// workClaimScript: ARGV P, kind, holder, n, ttl ms. Returns {lease end, id,
// payload, id, payload...}.
var workClaimScript = redis.NewScript(workPrelude + `
local t = clock()
local lease = t + math.max(tonumber(ARGV[5]), 0) * 1000
local ids = redis.call('ZRANGEBYSCORE', WL, '-inf', t, 'LIMIT', 0, tonumber(ARGV[4]))
local out = {lease}
for _, id in ipairs(ids) do
  redis.call('HSET', WH, id, ARGV[3])
  redis.call('ZADD', WL, lease, id)
  table.insert(out, id)
  table.insert(out, redis.call('HGET', WP, id) or '')
end
return out
`)

// workRenewScript: ARGV P, kind, holder, ttl ms, ids... Returns the ids lost.
var workRenewScript = redis.NewScript(workPrelude + `
local lease = clock() + math.max(tonumber(ARGV[4]), 0) * 1000
local lost = {}
for i = 5, #ARGV do
  local id = ARGV[i]
  if redis.call('HGET', WH, id) == ARGV[3] then
    redis.call('ZADD', WL, lease, id)
  else
    table.insert(lost, id)
  end
end
return lost
`)

// workDoneScript: ARGV P, kind, id, holder. Returns 1, or 0 when holder does
// not hold the item.
var workDoneScript = redis.NewScript(workPrelude + `
local id = ARGV[3]
if redis.call('HGET', WH, id) ~= ARGV[4] then return 0 end
redis.call('HDEL', WP, id)
redis.call('HDEL', WH, id)
redis.call('ZREM', WL, id)
return 1
`)
