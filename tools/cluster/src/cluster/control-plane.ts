// The control plane, on the host whatever the node count: etcd and kube-apiserver (the envtest
// build), kube-controller-manager and kube-scheduler (the cluster build).
import { join } from 'node:path';
import { ETCD_PORT, KUBECONFIG, LOGS, PKI, POD_RANGE, RUN, STATE, SVC_RANGE } from './layout.ts';
import { kubeconfig } from './pki.ts';
import { run, start, waitFor } from './proc.ts';

export interface Bins {
  envtest: string;
  cluster: string;
}

const proc = (name: string) => ({ pidFile: join(RUN, `${name}.pid`), logFile: join(LOGS, `${name}.log`) });

export const CONTROL_PLANE = ['etcd', 'kube-apiserver', 'kube-controller-manager', 'kube-scheduler'] as const;
export const controlPlanePidFile = (name: string) => proc(name).pidFile;

export function controlPlane(bins: Bins, hostIp: string, env: NodeJS.ProcessEnv): void {
  const server = `https://${hostIp}:6443`;
  const peer = `http://127.0.0.1:${ETCD_PORT + 10}`;
  start({
    ...proc('etcd'),
    cmd: join(bins.envtest, 'etcd'),
    args: [
      '--data-dir',
      join(STATE, 'etcd'),
      '--name',
      'cascade',
      '--listen-client-urls',
      `http://127.0.0.1:${ETCD_PORT}`,
      '--advertise-client-urls',
      `http://127.0.0.1:${ETCD_PORT}`,
      '--listen-peer-urls',
      peer,
      '--initial-advertise-peer-urls',
      peer,
      '--initial-cluster',
      `cascade=${peer}`,
      '--unsafe-no-fsync',
      '--log-level=warn',
    ],
  });
  start({
    ...proc('kube-apiserver'),
    cmd: join(bins.envtest, 'kube-apiserver'),
    args: [
      '--etcd-servers',
      `http://127.0.0.1:${ETCD_PORT}`,
      '--bind-address',
      hostIp,
      '--advertise-address',
      hostIp,
      '--secure-port',
      '6443',
      '--client-ca-file',
      join(PKI, 'ca.crt'),
      '--tls-cert-file',
      join(PKI, 'apiserver.crt'),
      '--tls-private-key-file',
      join(PKI, 'apiserver.key'),
      '--kubelet-client-certificate',
      join(PKI, 'apiserver-kubelet-client.crt'),
      '--kubelet-client-key',
      join(PKI, 'apiserver-kubelet-client.key'),
      '--service-account-key-file',
      join(PKI, 'sa.pub'),
      '--service-account-signing-key-file',
      join(PKI, 'sa.key'),
      '--service-account-issuer',
      'https://kubernetes.default.svc.cluster.local',
      '--authorization-mode',
      'Node,RBAC',
      '--enable-admission-plugins',
      'NodeRestriction',
      '--allow-privileged=true',
      '--kubelet-preferred-address-types',
      'InternalIP',
      // a stopped node's pods are evicted after 30 s rather than 5 min (the node-failure tests wait for it)
      '--default-not-ready-toleration-seconds',
      '30',
      '--default-unreachable-toleration-seconds',
      '30',
      '--service-cluster-ip-range',
      SVC_RANGE,
      '--enable-priority-and-fairness=false',
      '--profiling=false',
      '--v=1',
    ],
  });
  for (const c of ['admin', 'controller-manager', 'scheduler', 'kube-proxy']) kubeconfig(c, c, server);
  waitFor(
    90,
    'kube-apiserver',
    () => run('kubectl', ['get', '--raw', '/readyz'], { env, timeoutMs: 5000 }),
    LOGS,
  );
  const cm = join(STATE, 'controller-manager.kubeconfig');
  start({
    ...proc('kube-controller-manager'),
    cmd: join(bins.cluster, 'kube-controller-manager'),
    args: [
      '--kubeconfig',
      cm,
      '--authentication-kubeconfig',
      cm,
      '--authorization-kubeconfig',
      cm,
      '--service-account-private-key-file',
      join(PKI, 'sa.key'),
      '--root-ca-file',
      join(PKI, 'ca.crt'),
      '--use-service-account-credentials',
      '--service-cluster-ip-range',
      SVC_RANGE,
      '--cluster-cidr',
      POD_RANGE,
      // a node that stops reporting is NotReady after 20 s (default 50 s)
      '--node-monitor-grace-period',
      '20s',
      '--leader-elect=false',
      '--bind-address',
      '127.0.0.1',
      '--secure-port',
      '10257',
      '--profiling=false',
      '--v=1',
    ],
  });
  const sc = join(STATE, 'scheduler.kubeconfig');
  start({
    ...proc('kube-scheduler'),
    cmd: join(bins.cluster, 'kube-scheduler'),
    args: [
      '--kubeconfig',
      sc,
      '--authentication-kubeconfig',
      sc,
      '--authorization-kubeconfig',
      sc,
      '--leader-elect=false',
      '--bind-address',
      '127.0.0.1',
      '--secure-port',
      '10259',
      '--profiling=false',
      '--v=1',
    ],
  });
}

export { KUBECONFIG };
