// One TCP flow of BYTES bytes over a single point-to-point link (ns-3), for the packet
// backend's speed comparison. Prints one JSON line: simulated completion time, wall time,
// data packets and data packets per wall-second.
// Build: g++ -O2 single_flow.cc $(pkg-config --cflags --libs ns3-core ns3-network \
//        ns3-internet ns3-point-to-point ns3-applications) -o single_flow
// Usage: ./single_flow MTU [BYTES] [RATE] [DELAY]
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
  uint32_t mtu = argc > 1 ? std::stoul(argv[1]) : 1500;
  g_target = argc > 2 ? std::stoull(argv[2]) : 100000000ULL;
  std::string rate = argc > 3 ? argv[3] : "100Gbps";
  std::string delay = argc > 4 ? argv[4] : "1us";
  uint32_t mss = mtu - 52;  // IPv4 20 + TCP 20 + timestamps 12
  Config::SetDefault("ns3::TcpSocket::SegmentSize", UintegerValue(mss));
  Config::SetDefault("ns3::TcpSocket::SndBufSize", UintegerValue(1 << 27));
  Config::SetDefault("ns3::TcpSocket::RcvBufSize", UintegerValue(1 << 27));
  Config::SetDefault("ns3::TcpSocket::InitialCwnd", UintegerValue(10));
  Config::SetDefault("ns3::TcpSocket::DelAckCount", UintegerValue(2));

  NodeContainer nodes;
  nodes.Create(2);
  PointToPointHelper p2p;
  p2p.SetDeviceAttribute("DataRate", StringValue(rate));
  p2p.SetDeviceAttribute("Mtu", UintegerValue(mtu));
  p2p.SetChannelAttribute("Delay", StringValue(delay));
  p2p.SetQueue("ns3::DropTailQueue", "MaxSize", StringValue("10000p"));
  NetDeviceContainer dev = p2p.Install(nodes);
  InternetStackHelper stack;
  stack.Install(nodes);
  Ipv4AddressHelper addr;
  addr.SetBase("10.0.0.0", "255.255.255.0");
  Ipv4InterfaceContainer ifs = addr.Assign(dev);

  uint16_t port = 5000;
  PacketSinkHelper sink("ns3::TcpSocketFactory", InetSocketAddress(Ipv4Address::GetAny(), port));
  ApplicationContainer sinkApp = sink.Install(nodes.Get(1));
  sinkApp.Start(Seconds(0.0));
  sinkApp.Get(0)->TraceConnectWithoutContext("Rx", MakeCallback(&OnRx));
  BulkSendHelper bulk("ns3::TcpSocketFactory", InetSocketAddress(ifs.GetAddress(1), port));
  bulk.SetAttribute("MaxBytes", UintegerValue(g_target));
  bulk.SetAttribute("SendSize", UintegerValue(1 << 16));
  ApplicationContainer src = bulk.Install(nodes.Get(0));
  src.Start(Seconds(0.0));

  auto t0 = std::chrono::steady_clock::now();
  Simulator::Stop(Seconds(10.0));
  Simulator::Run();
  double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  Simulator::Destroy();
  double pkts = std::ceil(double(g_target) / mss);
  std::printf("{\"peer\": \"ns-3\", \"mtu\": %u, \"bytes\": %llu, \"completion_s\": %.9g, "
              "\"wall_s\": %.6g, \"data_packets\": %.0f, \"packets_per_s\": %.6g}\n",
              mtu, (unsigned long long)g_target, g_done, wall, pkts, pkts / wall);
  return g_done > 0 ? 0 : 1;
}
