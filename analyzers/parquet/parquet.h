// The parquet folder's front door: Parquet files written from the reports' rows (the export).
//   table_writer.h   one file: its schema, rows added column by column, row groups, the footer
//   thrift_compact.h the encoding of the format's page headers and footer
#pragma once

#include "parquet/table_writer.h"
