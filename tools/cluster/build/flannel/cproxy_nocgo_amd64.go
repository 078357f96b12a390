// Cascade's stand-in for flannel's C proxy when flanneld is built without cgo
// (tools/cluster/build/flannel.sh copies it into pkg/backend/udp of its copy of the flannel module).
// The udp backend forwards packets through a proxy written in C; every other backend, vxlan among
// them (the only one Cascade's clusters configure), is pure Go. Built without cgo, flanneld links
// with every other backend, and the udp backend fails loudly when asked to start, never quietly.

//go:build !cgo && !windows

package udp

import (
	"net"
	"os"

	"github.com/flannel-io/flannel/pkg/ip"
)

const noCgo = "flannel's udp backend needs cgo, and this flanneld was built without it (Cascade's clusters use vxlan)"

func runCProxy(tun *os.File, conn *net.UDPConn, ctl *os.File, tunIP ip.IP4, tunMTU int) {
	panic(noCgo)
}

func setRoute(ctl *os.File, dst ip.IP4Net, nextHopIP ip.IP4, nextHopPort int) { panic(noCgo) }

func removeRoute(ctl *os.File, dst ip.IP4Net) { panic(noCgo) }

func stopProxy(ctl *os.File) {}
