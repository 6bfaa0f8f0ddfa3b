// graph/ — NCCL ops inside CUDA graphs. A captured op runs nothing when called: it runs at every
// launch of an executable graph made from its capture. This folder follows captures to graphs and
// graphs to executable graphs (graph_table.h), so that a launch (wrap/cuda_graphs.cc) can record
// the NCCL ops it replays.
//
// May include: process/, comms/ (a captured op's communicator), trace/ (Graph records).
//
// Every header here is used outside the folder: this front door only gathers them.
#pragma once

#include "graph/graph_table.h"
