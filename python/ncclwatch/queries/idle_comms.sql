-- Communicators idle on GPU memory, per job, as `ncclwatch-report memory` names them by its defaults:
-- the ranks holding at least 256 MiB (held_bytes, as last read) that ran no op for 60 s or more
-- (idle_ms: from their last op, or their creation, to their release or the end of the trace). Other
-- thresholds (--idle-min-mib, --idle-after): the two numbers of the WHERE. ranks_until_end: the ranks
-- idle until the end of their trace (leaked, or no destroy or abort entered); the others idled until
-- their destroy or abort.
SELECT job, comm_id, min(name) AS name, min(site) AS site, count(*) AS ranks_idle, max(nranks) AS nranks,
       CAST(sum(held_bytes) AS BIGINT) AS held_bytes, max(idle_ms) AS max_idle_ms,
       count(CASE WHEN leaked OR release_begin_ns IS NULL THEN 1 END) AS ranks_until_end,
       count(DISTINCT host) AS hosts
FROM comms
WHERE held_bytes >= 268435456 AND idle_ms >= 60000
GROUP BY job, comm_id
ORDER BY held_bytes DESC, job, comm_id
