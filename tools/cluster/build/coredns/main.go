// CoreDNS for the cluster harness, with only the plugins a cluster's Corefile uses
// (tools/cluster/manifests/coredns.yaml: errors, health, ready, kubernetes, cache, loadbalance) and
// the ones a user editing that Corefile reaches for first (forward, log, reload, loop, prometheus).
// CoreDNS's own main imports every plugin, the cloud DNS providers' SDKs among them, which more than
// doubles the first build on two cores. The server keeps CoreDNS's directive order
// (dnsserver.Directives); a directive whose plugin is not compiled in is rejected at start-up as
// "no action found for directive 'NAME'".
package main

import (
	_ "github.com/coredns/coredns/plugin/cache"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/forward"
	_ "github.com/coredns/coredns/plugin/health"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/loadbalance"
	_ "github.com/coredns/coredns/plugin/log"
	_ "github.com/coredns/coredns/plugin/loop"
	_ "github.com/coredns/coredns/plugin/metrics"
	_ "github.com/coredns/coredns/plugin/ready"
	_ "github.com/coredns/coredns/plugin/reload"

	"github.com/coredns/coredns/coremain"
)

func main() {
	coremain.Run()
}
