import { LabIcon } from '@jupyterlab/ui-components';

/** A GPU board; coloured by the theme through the `jp-icon3` class. */
const GPU_SVG = `<svg xmlns="http://www.w3.org/2000/svg" width="16" height="16" viewBox="0 0 24 24">
  <g class="jp-icon3" fill="#616161">
    <path d="M2 6h18a2 2 0 0 1 2 2v8a2 2 0 0 1-2 2h-7v2h-2v-2H9v2H7v-2H4v2H2V6zm2 2v8h16V8H4z"/>
    <circle cx="9" cy="12" r="2.5"/>
    <rect x="14" y="10" width="4" height="4" rx="0.5"/>
  </g>
</svg>`;

export const gpuIcon = new LabIcon({
  name: 'jupyter-gpusched:gpu',
  svgstr: GPU_SVG
});
