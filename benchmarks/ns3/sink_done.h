// Shared by the ns-3 peers: stop the simulation when the sink has received g_target bytes
// and keep that instant in g_done (seconds; -1 until then).
#pragma once
#include "ns3/core-module.h"
#include "ns3/network-module.h"

static uint64_t g_target = 0;  // bytes the sink must receive in all
static uint64_t g_rx = 0;
static double g_done = -1.0;

static void OnRx(ns3::Ptr<const ns3::Packet> p, const ns3::Address &) {
  g_rx += p->GetSize();
  if (g_done < 0 && g_rx >= g_target) {
    g_done = ns3::Simulator::Now().GetSeconds();
    ns3::Simulator::Stop();
  }
}
