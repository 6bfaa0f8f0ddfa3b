-- Which code paths leak a communicator in every run: per creation site, the jobs where it leaked
-- against the jobs exported.
SELECT site, count(DISTINCT job) AS jobs_leaking,
       (SELECT count(DISTINCT job) FROM processes) AS jobs,
       count(*) AS instances_leaked
FROM comms
WHERE leaked
GROUP BY site
ORDER BY jobs_leaking DESC, site
