-- Per collective (job, communicator, seq) that every traced rank of its communicator started on the
-- GPU: the rank that started last, its host, how long after the rank before it (late_ns), and the
-- ranks present (those with any op on the communicator). A tie to the nanosecond goes to the lower
-- rank. Lateness is judged on GPU starts: a host returns from an enqueue long before its GPU runs.
WITH starts AS (
  SELECT job, host, comm_id, seq, rank, gpu_begin_ns AS t
  FROM ops
  WHERE seq > 0 AND peer IS NULL AND rank >= 0 AND gpu_begin_ns IS NOT NULL
),
present AS (
  SELECT job, comm_id, count(DISTINCT rank) AS ranks
  FROM ops
  WHERE rank >= 0
  GROUP BY job, comm_id
),
ordered AS (
  SELECT s.job, s.host, s.comm_id, s.seq, s.rank, s.t, p.ranks,
         row_number() OVER (PARTITION BY s.job, s.comm_id, s.seq ORDER BY s.t DESC, s.rank) AS place,
         lead(s.t) OVER (PARTITION BY s.job, s.comm_id, s.seq ORDER BY s.t DESC, s.rank) AS before_it,
         count(*) OVER (PARTITION BY s.job, s.comm_id, s.seq) AS started
  FROM starts s JOIN present p ON s.job = p.job AND s.comm_id = p.comm_id
)
SELECT job, comm_id, seq, rank, host, t - before_it AS late_ns, ranks
FROM ordered
WHERE place = 1 AND started = ranks AND ranks >= 2
