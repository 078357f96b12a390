// A Pod object as kube-apiserver serves it for a Deployment's running pod (metadata with owner and
// managedFields, one container with a named port and probes, the service-account token volume,
// status with conditions and container status): what an informer that watches Pods holds per pod.
import type { Pod } from '@cascade/netpolicy';

export function podObject(p: Pod, i: number): Record<string, unknown> {
  const t = '2026-11-24T08:00:00Z';
  const hash = (i * 2654435761).toString(16).slice(-10);
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: {
      name: p.name,
      generateName: `${p.labels.app ?? 'app'}-${hash}-`,
      namespace: p.namespace,
      uid: `0b3c${hash}-8f1e-4c1a-9d2b-${String(i).padStart(12, '0')}`,
      resourceVersion: String(100000 + i),
      creationTimestamp: t,
      labels: { ...p.labels, 'pod-template-hash': hash },
      ownerReferences: [
        {
          apiVersion: 'apps/v1',
          kind: 'ReplicaSet',
          name: `${p.labels.app ?? 'app'}-${hash}`,
          uid: `5d1e${hash}-1f2e-4a3b-8c4d-${String(i).padStart(12, '0')}`,
          controller: true,
          blockOwnerDeletion: true,
        },
      ],
      managedFields: [
        {
          manager: 'kube-controller-manager',
          operation: 'Update',
          apiVersion: 'v1',
          time: t,
          fieldsType: 'FieldsV1',
          fieldsV1: {
            'f:metadata': {
              'f:generateName': {},
              'f:labels': { '.': {}, 'f:app': {}, 'f:pod-template-hash': {}, 'f:tier': {} },
              'f:ownerReferences': { '.': {}, [`k:{"uid":"5d1e${hash}"}`]: {} },
            },
            'f:spec': {
              'f:containers': {
                'k:{"name":"app"}': {
                  '.': {},
                  'f:image': {},
                  'f:imagePullPolicy': {},
                  'f:name': {},
                  'f:ports': { '.': {}, 'k:{"containerPort":8080,"protocol":"TCP"}': {} },
                  'f:readinessProbe': { '.': {}, 'f:httpGet': {}, 'f:periodSeconds': {} },
                  'f:resources': { '.': {}, 'f:requests': {} },
                },
              },
              'f:dnsPolicy': {},
              'f:enableServiceLinks': {},
              'f:restartPolicy': {},
              'f:schedulerName': {},
              'f:securityContext': {},
              'f:terminationGracePeriodSeconds': {},
            },
          },
        },
        {
          manager: 'kubelet',
          operation: 'Update',
          apiVersion: 'v1',
          time: t,
          fieldsType: 'FieldsV1',
          subresource: 'status',
          fieldsV1: {
            'f:status': {
              'f:conditions': { 'k:{"type":"Ready"}': {}, 'k:{"type":"ContainersReady"}': {} },
              'f:containerStatuses': {},
              'f:hostIP': {},
              'f:phase': {},
              'f:podIP': {},
              'f:podIPs': {},
              'f:startTime': {},
            },
          },
        },
      ],
    },
    spec: {
      volumes: [
        {
          name: `kube-api-access-${hash.slice(0, 5)}`,
          projected: {
            sources: [
              { serviceAccountToken: { expirationSeconds: 3607, path: 'token' } },
              { configMap: { name: 'kube-root-ca.crt', items: [{ key: 'ca.crt', path: 'ca.crt' }] } },
              {
                downwardAPI: {
                  items: [
                    { path: 'namespace', fieldRef: { apiVersion: 'v1', fieldPath: 'metadata.namespace' } },
                  ],
                },
              },
            ],
            defaultMode: 420,
          },
        },
      ],
      containers: [
        {
          name: 'app',
          image: 'registry.example.com/team/app:1.4.2',
          ports: p.ports.map((x) => ({ name: x.name, containerPort: x.port, protocol: x.protocol })),
          resources: { requests: { cpu: '100m', memory: '128Mi' } },
          volumeMounts: [
            {
              name: `kube-api-access-${hash.slice(0, 5)}`,
              readOnly: true,
              mountPath: '/var/run/secrets/kubernetes.io/serviceaccount',
            },
          ],
          readinessProbe: {
            httpGet: { path: '/healthz', port: 8080, scheme: 'HTTP' },
            timeoutSeconds: 1,
            periodSeconds: 5,
            successThreshold: 1,
            failureThreshold: 3,
          },
          terminationMessagePath: '/dev/termination-log',
          terminationMessagePolicy: 'File',
          imagePullPolicy: 'IfNotPresent',
        },
      ],
      restartPolicy: 'Always',
      terminationGracePeriodSeconds: 30,
      dnsPolicy: 'ClusterFirst',
      serviceAccountName: 'default',
      serviceAccount: 'default',
      nodeName: p.node,
      securityContext: {},
      schedulerName: 'default-scheduler',
      tolerations: [
        {
          key: 'node.kubernetes.io/not-ready',
          operator: 'Exists',
          effect: 'NoExecute',
          tolerationSeconds: 300,
        },
        {
          key: 'node.kubernetes.io/unreachable',
          operator: 'Exists',
          effect: 'NoExecute',
          tolerationSeconds: 300,
        },
      ],
      priority: 0,
      enableServiceLinks: true,
      preemptionPolicy: 'PreemptLowerPriority',
    },
    status: {
      phase: 'Running',
      conditions: [
        'PodReadyToStartContainers',
        'Initialized',
        'Ready',
        'ContainersReady',
        'PodScheduled',
      ].map((type) => ({ type, status: 'True', lastProbeTime: null, lastTransitionTime: t })),
      hostIP: '192.168.0.10',
      hostIPs: [{ ip: '192.168.0.10' }],
      podIP: p.ips[0],
      podIPs: p.ips.map((ip) => ({ ip })),
      startTime: t,
      containerStatuses: [
        {
          name: 'app',
          state: { running: { startedAt: t } },
          lastState: {},
          ready: true,
          restartCount: 0,
          image: 'registry.example.com/team/app:1.4.2',
          imageID: `registry.example.com/team/app@sha256:${'4f'.repeat(32)}`,
          containerID: `containerd://${hash.padEnd(64, 'a')}`,
          started: true,
        },
      ],
      qosClass: 'Burstable',
    },
  };
}
