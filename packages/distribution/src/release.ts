// `@cascade/distribution/release`: what builds a release's artifacts from the code, for the harness
// and its tests: the chart's generated files and deploy/cascade.yaml (chart-files.ts), the Grafana
// dashboard (dashboard.ts). The images are built by running images.ts (a script, see its header).
export { CHART, DEPLOY, renderDeploy, staleChartFiles } from './chart-files.ts';
export { DASHBOARD, dashboardFamilies, dashboardJson } from './dashboard.ts';
