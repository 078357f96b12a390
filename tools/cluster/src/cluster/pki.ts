// The cluster's certificates (EC P-256, one CA) and kubeconfigs. Node certificates are issued per
// node when missing, so a node added to a running cluster gets its own.
import { existsSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { API_SVC_IP, PKI, STATE } from './layout.ts';
import { log, run } from './proc.ts';

const openssl = (...args: string[]) => run('openssl', args);

function issue(name: string, cn: string, o: string, san?: string): void {
  const key = join(PKI, `${name}.key`);
  const csr = join(PKI, `${name}.csr`);
  const ext = join(PKI, `${name}.ext`);
  openssl('ecparam', '-name', 'prime256v1', '-genkey', '-noout', '-out', key);
  openssl('req', '-new', '-key', key, '-subj', `${o ? `/O=${o}` : ''}/CN=${cn}`, '-out', csr);
  writeFileSync(
    ext,
    san
      ? `keyUsage=critical,digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth,clientAuth\nsubjectAltName=${san}\n`
      : 'keyUsage=critical,digitalSignature,keyEncipherment\nextendedKeyUsage=clientAuth\n',
  );
  openssl(
    'x509',
    '-req',
    '-in',
    csr,
    '-CA',
    join(PKI, 'ca.crt'),
    '-CAkey',
    join(PKI, 'ca.key'),
    '-CAcreateserial',
    '-days',
    '3650',
    '-extfile',
    ext,
    '-out',
    join(PKI, `${name}.crt`),
  );
  rmSync(csr);
  rmSync(ext);
}

/** The CA and the control plane's certificates, once. */
export function controlPlanePki(hostIp: string): void {
  if (existsSync(join(PKI, '.done'))) return;
  log('issuing certificates (EC P-256)');
  mkdirSync(PKI, { recursive: true });
  openssl('ecparam', '-name', 'prime256v1', '-genkey', '-noout', '-out', join(PKI, 'ca.key'));
  openssl(
    'req',
    '-x509',
    '-new',
    '-key',
    join(PKI, 'ca.key'),
    '-subj',
    '/CN=cascade-cluster-ca',
    '-days',
    '3650',
    '-out',
    join(PKI, 'ca.crt'),
  );
  issue(
    'apiserver',
    'kube-apiserver',
    '',
    `IP:${hostIp},IP:${API_SVC_IP},IP:127.0.0.1,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local`,
  );
  issue('apiserver-kubelet-client', 'kube-apiserver-kubelet-client', 'system:masters');
  issue('admin', 'cascade-admin', 'system:masters');
  issue('controller-manager', 'system:kube-controller-manager', '');
  issue('scheduler', 'system:kube-scheduler', '');
  issue('kube-proxy', 'system:kube-proxy', '');
  openssl('ecparam', '-name', 'prime256v1', '-genkey', '-noout', '-out', join(PKI, 'sa.key'));
  openssl('ec', '-in', join(PKI, 'sa.key'), '-pubout', '-out', join(PKI, 'sa.pub'));
  writeFileSync(join(PKI, '.done'), '');
}

/** A client certificate (file stem `name`, common name `cn`), once. */
export function clientPki(name: string, cn: string): string {
  if (!existsSync(join(PKI, `${name}.crt`))) issue(name, cn, '');
  return name;
}

/** A node's kubelet client and serving certificates (file stem `kubelet-NAME`), once per node. */
export function nodePki(name: string, ip: string): string {
  const stem = `kubelet-${name}`;
  if (!existsSync(join(PKI, `${stem}-serving.crt`))) {
    issue(stem, `system:node:${name}`, 'system:nodes');
    issue(`${stem}-serving`, `system:node:${name}`, 'system:nodes', `IP:${ip},DNS:${name}`);
  }
  return stem;
}

/** A kubeconfig for `user` with certificate `cert` at `server`; its path. */
export function kubeconfig(user: string, cert: string, server: string): string {
  const f = join(STATE, `${user}.kubeconfig`);
  writeFileSync(
    f,
    `apiVersion: v1
kind: Config
clusters:
  - name: cascade
    cluster: {server: "${server}", certificate-authority: "${join(PKI, 'ca.crt')}"}
users:
  - name: ${user}
    user: {client-certificate: "${join(PKI, `${cert}.crt`)}", client-key: "${join(PKI, `${cert}.key`)}"}
contexts:
  - name: cascade
    context: {cluster: cascade, user: ${user}}
current-context: cascade
`,
  );
  return f;
}
