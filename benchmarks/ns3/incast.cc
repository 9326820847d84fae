// Incast for the packet backend's speed comparison (ns-3): N hosts on one switch (a
// router node, one point-to-point link per host), hosts 1..N-1 each send BYTES to host 0
// over TCP at once. Prints one JSON line: the last completion, wall time, data packets
// and data packets per wall-second.
// Build: g++ -O2 incast.cc $(pkg-config --cflags --libs ns3-core ns3-network \
//        ns3-internet ns3-point-to-point ns3-applications) -o incast
// Usage: ./incast N [BYTES] [MTU] [RATE] [DELAY] [QUEUE_PACKETS]
#include <chrono>
#include <cmath>
#include <cstdio>
#include <string>

#include "ns3/applications-module.h"
#include "ns3/core-module.h"
#include "ns3/internet-module.h"
#include "ns3/network-module.h"
#include "ns3/point-to-point-module.h"
#include "sink_done.h"

using namespace ns3;

int main(int argc, char *argv[]) {
  uint32_t n = argc > 1 ? std::stoul(argv[1]) : 128;
  uint64_t bytes = argc > 2 ? std::stoull(argv[2]) : 1000000ULL;
  uint32_t mtu = argc > 3 ? std::stoul(argv[3]) : 1500;
  std::string rate = argc > 4 ? argv[4] : "100Gbps";
  std::string delay = argc > 5 ? argv[5] : "1us";
  std::string queue = argc > 6 ? argv[6] : "1000p";
  uint32_t mss = mtu - 52;  // IPv4 20 + TCP 20 + timestamps 12
  g_target = bytes * (n - 1);
  Config::SetDefault("ns3::TcpSocket::SegmentSize", UintegerValue(mss));
  Config::SetDefault("ns3::TcpSocket::SndBufSize", UintegerValue(1 << 24));
  Config::SetDefault("ns3::TcpSocket::RcvBufSize", UintegerValue(1 << 24));
  Config::SetDefault("ns3::TcpSocket::InitialCwnd", UintegerValue(10));
  Config::SetDefault("ns3::TcpSocket::DelAckCount", UintegerValue(2));
  Config::SetDefault("ns3::TcpSocketBase::MinRto", TimeValue(MicroSeconds(200)));

  NodeContainer hosts;
  hosts.Create(n);
  NodeContainer sw;
  sw.Create(1);
  InternetStackHelper stack;
  stack.Install(hosts);
  stack.Install(sw);
  PointToPointHelper p2p;
  p2p.SetDeviceAttribute("DataRate", StringValue(rate));
  p2p.SetDeviceAttribute("Mtu", UintegerValue(mtu));
  p2p.SetChannelAttribute("Delay", StringValue(delay));
  p2p.SetQueue("ns3::DropTailQueue", "MaxSize", StringValue(queue));
  Ipv4AddressHelper addr;
  std::vector<Ipv4Address> ip(n);
  for (uint32_t i = 0; i < n; ++i) {
    NetDeviceContainer dev = p2p.Install(hosts.Get(i), sw.Get(0));
    char base[32];
    std::snprintf(base, sizeof base, "10.%u.%u.0", i / 256, i % 256);
    addr.SetBase(base, "255.255.255.0");
    ip[i] = addr.Assign(dev).GetAddress(0);
  }
  Ipv4GlobalRoutingHelper::PopulateRoutingTables();

  uint16_t port = 5000;
  PacketSinkHelper sink("ns3::TcpSocketFactory", InetSocketAddress(Ipv4Address::GetAny(), port));
  ApplicationContainer sinkApp = sink.Install(hosts.Get(0));
  sinkApp.Start(Seconds(0.0));
  sinkApp.Get(0)->TraceConnectWithoutContext("Rx", MakeCallback(&OnRx));
  for (uint32_t i = 1; i < n; ++i) {
    BulkSendHelper bulk("ns3::TcpSocketFactory", InetSocketAddress(ip[0], port));
    bulk.SetAttribute("MaxBytes", UintegerValue(bytes));
    bulk.SetAttribute("SendSize", UintegerValue(1 << 16));
    bulk.Install(hosts.Get(i)).Start(Seconds(0.0));
  }

  auto t0 = std::chrono::steady_clock::now();
  Simulator::Stop(Seconds(10.0));
  Simulator::Run();
  double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  Simulator::Destroy();
  double pkts = (n - 1) * std::ceil(double(bytes) / mss);
  std::printf("{\"peer\": \"ns-3\", \"hosts\": %u, \"mtu\": %u, \"bytes\": %llu, "
              "\"completion_s\": %.9g, \"wall_s\": %.6g, \"data_packets\": %.0f, "
              "\"packets_per_s\": %.6g}\n",
              n, mtu, (unsigned long long)bytes, g_done, wall, pkts, pkts / wall);
  return g_done > 0 ? 0 : 1;
}
