"""The Lua scripts behind RedisStore. Each runs atomically inside Redis, which is what makes the guarantees hold.

Keys per response (one hash tag, so a script touches one Cluster slot; names in ``redis_keys.py``):
``rec`` a hash (``json`` the record, ``last`` the highest sequence number, ``term`` the terminal's sequence number
once written, ``leased`` = 1 once a lease was taken), ``log`` a stream whose entry ids are ``0-<seq+1>`` (fields
``t`` type, ``d`` data, ``x`` terminal 1/0), ``lease`` a string holding the instance id, with a PX expiry.
"""

from __future__ import annotations

__all__ = ["APPEND", "DELETE", "RELEASE", "RENEW", "TAKE", "UPDATE"]

# KEYS rec, log, lease (one hash tag: one Cluster slot). ARGV mode, expect_last, record_json, response_id, then
# (seq, type, data, terminal) per entry. (The caller drops the response from the leased index after a terminal.)
# mode "append": the writer's batch; "lost": only when the log was leased, the lease is gone and nothing moved since
# the caller looked (expect_last); "force": recovery at startup, also guarded by expect_last.
# Returns "ok" | "missing" | "ended" | "dup" | "alive" | "moved" | "gap:<last>". Everything is checked before
# anything is written. "gap:<last>": the first new entry is not last + 1, so writing it would leave a hole: the log
# lost a tail it had acknowledged (a failover to a replica that had not received it); the caller resends it.
APPEND = """
local rec, log, lease = KEYS[1], KEYS[2], KEYS[3]
if redis.call('EXISTS', rec) == 0 then return 'missing' end
local st = redis.call('HMGET', rec, 'last', 'term', 'leased')
local last = tonumber(st[1] or '-1')
local mode = ARGV[1]
-- Idempotent by sequence number: a retry whose first attempt landed (the reply was lost in a stall) re-sends
-- entries the log holds. In append mode they are recognised (same type, data, terminal flag) and skipped.
local first = 5
if mode == 'append' then
  while first <= #ARGV and tonumber(ARGV[first]) <= last do
    local id = string.format('0-%d', tonumber(ARGV[first]) + 1)
    local got = redis.call('XRANGE', log, id, id)
    -- A different entry at a taken number: 'ended' when the log has a terminal (someone else ended it: worker_lost,
    -- a cancel from another instance), so the writer is told that rather than a duplicate of its own.
    if #got == 0 then return st[2] and 'ended' or 'dup' end
    local f = got[1][2]
    if f[1] ~= 't' or f[2] ~= ARGV[first + 1] or f[4] ~= ARGV[first + 2] or f[6] ~= ARGV[first + 3] then
      return st[2] and 'ended' or 'dup'
    end
    first = first + 4
  end
  if first > #ARGV then return 'ok' end
end
if st[2] then return 'ended' end
if mode == 'lost' and (st[3] ~= '1' or redis.call('EXISTS', lease) == 1) then return 'alive' end
if mode ~= 'append' and tonumber(ARGV[2]) ~= last then return 'moved' end
if tonumber(ARGV[first]) > last + 1 then return string.format('gap:%d', last) end
local prev = last
for b = first, #ARGV, 4 do
  local seq = tonumber(ARGV[b])
  if seq ~= prev + 1 then return 'dup' end
  prev = seq
end
for b = first, #ARGV, 4 do
  redis.call('XADD', log, string.format('0-%d', tonumber(ARGV[b]) + 1), 't', ARGV[b + 1], 'd', ARGV[b + 2],
             'x', ARGV[b + 3])
  if ARGV[b + 3] == '1' then
    redis.call('HSET', rec, 'term', ARGV[b])
  end
end
redis.call('HSET', rec, 'last', string.format('%d', prev))
if ARGV[3] ~= '' then redis.call('HSET', rec, 'json', ARGV[3]) end
local ttl = redis.call('PTTL', rec)
if ttl > 0 then redis.call('PEXPIRE', log, ttl) end
return 'ok'
"""

# KEYS rec, log, lease. Deletes the record; leaves a tombstone entry (id from the clock, above every 0-N id) so
# readers blocked in XREAD wake and stop, and lets the stream itself expire shortly after.
DELETE = """
local existed = redis.call('DEL', KEYS[1], KEYS[3])
if redis.call('EXISTS', KEYS[2]) == 1 then
  redis.call('XADD', KEYS[2], '*', 'gone', '1')
  redis.call('PEXPIRE', KEYS[2], 60000)
end
return existed
"""

# KEYS rec. ARGV json. Replace the record only while it exists (a late update must not resurrect a deleted one).
UPDATE = """
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
redis.call('HSET', KEYS[1], 'json', ARGV[1])
return 1
"""

# KEYS rec, lease. ARGV instance_id, lease_ms. (The caller adds the response to the leased index first.)
TAKE = """
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
redis.call('SET', KEYS[2], ARGV[1], 'PX', ARGV[2])
redis.call('HSET', KEYS[1], 'leased', '1')
return 1
"""

# KEYS rec, lease. ARGV instance_id, lease_ms. Extend our lease; take it back if it lapsed but nobody ended the log.
RENEW = """
local holder = redis.call('GET', KEYS[2])
if holder == ARGV[1] then return redis.call('PEXPIRE', KEYS[2], ARGV[2]) end
if holder == false and redis.call('EXISTS', KEYS[1]) == 1 and redis.call('HEXISTS', KEYS[1], 'term') == 0 then
  redis.call('SET', KEYS[2], ARGV[1], 'PX', ARGV[2])
  return 1
end
return 0
"""

# KEYS lease. ARGV instance_id.
RELEASE = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
"""
