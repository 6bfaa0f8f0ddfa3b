-- Per collective (job, communicator, seq) that every traced rank of its communicator started on the
-- GPU: the rank that started last, its host, how long the others waited for it (late_ns), and the
-- ranks present (those with any op on the communicator). A tie to the nanosecond goes to the lower
-- rank. Lateness is judged on GPU starts: a host returns from an enqueue long before its GPU runs.
-- The wait is the last start's lead over the one before, but no more than that one's GPU time less
-- the last one's (they end together), and none when the last one began as its own previous launch
-- ended (held_by_previous), as `ncclwatch-report hang` counts it.
WITH starts AS (
  SELECT job, host, comm_id, seq, rank, gpu_begin_ns AS t, gpu_end_ns - gpu_begin_ns AS took, held_by_previous AS held
  FROM ops
  WHERE seq > 0 AND peer IS NULL AND rank >= 0 AND gpu_begin_ns IS NOT NULL AND timing = 'gpu'
),
present AS (
  SELECT job, comm_id, count(DISTINCT rank) AS ranks
  FROM ops
  WHERE rank >= 0
  GROUP BY job, comm_id
),
ordered AS (
  SELECT s.job, s.host, s.comm_id, s.seq, s.rank, s.t, s.took, s.held, p.ranks,
         row_number() OVER (PARTITION BY s.job, s.comm_id, s.seq ORDER BY s.t DESC, s.rank) AS place,
         lead(s.t) OVER (PARTITION BY s.job, s.comm_id, s.seq ORDER BY s.t DESC, s.rank) AS before_it,
         lead(s.took) OVER (PARTITION BY s.job, s.comm_id, s.seq ORDER BY s.t DESC, s.rank) AS before_took,
         count(*) OVER (PARTITION BY s.job, s.comm_id, s.seq) AS started
  FROM starts s JOIN present p ON s.job = p.job AND s.comm_id = p.comm_id
)
SELECT job, comm_id, seq, rank, host,
       CASE WHEN held THEN 0
            WHEN took >= 0 AND before_took >= 0 THEN least(greatest(before_took - took, 0), t - before_it)
            ELSE t - before_it END AS late_ns,
       ranks
FROM ordered
WHERE place = 1 AND started = ranks AND ranks >= 2
