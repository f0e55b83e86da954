-- depends on: runs, scale_points, power_samples, run_manifests
-- One row per run: whether it has power figures (scale_points' average power per device), which
-- power sources its samples came from and which energy rule was used, and, for a run that
-- captured no power, the reason its manifest gives (power.unavailable_reason), NULL when none.
CREATE OR REPLACE VIEW power_coverage AS
WITH sampled AS (
    SELECT
        study, run_id,
        count(*) AS n_samples,
        string_agg(DISTINCT source, ', ' ORDER BY source) AS sources
    FROM power_samples
    GROUP BY study, run_id
)
SELECT
    r.study,
    r.run_id,
    s.avg_power_w_per_device IS NOT NULL AS has_power,
    coalesce(p.n_samples, 0) AS n_power_samples,
    p.sources AS source,
    s.energy_method,
    json_extract_string(m.power, '$.unavailable_reason') AS unavailable_reason
FROM runs AS r
LEFT JOIN scale_points AS s ON r.study = s.study AND r.run_id = s.run_id
LEFT JOIN sampled AS p ON r.study = p.study AND r.run_id = p.run_id
LEFT JOIN run_manifests AS m ON r.study = m.study AND r.run_id = m.run_id;
