// The reports' front door: the subcommands of ncclwatch-report (summary, leaks, latency, hang,
// timeline, html, metrics, dump, columns, watch, export, where), one file each, rendering the model
// (model/model.h) and its findings as text, JSON, CSV, HTML or Prometheus metrics. Inside:
//   options.h, commands.h   what a report is asked, and the entry points
//   input.h, output.h       reading the job with its problems named; writing text, CSV, JSON, files
//   column_table.h          one declaration per output table, for every format
//   analysis_json.h, leak_report.h, summary_report.h, job_identity.h
//                           the results the reports read from one another, so all say the same
#pragma once

#include "reports/analysis_json.h"
#include "reports/column_table.h"
#include "reports/commands.h"
#include "reports/input.h"
#include "reports/job_identity.h"
#include "reports/leak_report.h"
#include "reports/output.h"
#include "reports/summary_report.h"
