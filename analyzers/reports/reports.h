// The reports' front door: the subcommands of ncclwatch-report (summary, leaks, latency, hang,
// timeline, html, metrics, dump), one file each, rendering the model (model/model.h) and its
// findings as text, JSON, CSV, HTML or Prometheus metrics.
#pragma once

#include "reports/shared.h"
