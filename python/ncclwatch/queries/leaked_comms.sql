-- Communicators leaked, per job, with where they were made: the ranks where each leaked, as
-- `ncclwatch-report leaks` lists them (never destroyed nor aborted, released only while the process
-- exited, or a teardown that never returned).
SELECT job, comm_id, min(name) AS name, min(site) AS site, count(*) AS ranks_leaked,
       min(rank) AS lowest_rank, max(nranks) AS nranks, min(state) AS state, count(DISTINCT host) AS hosts
FROM comms
WHERE leaked
GROUP BY job, comm_id
ORDER BY job, comm_id
