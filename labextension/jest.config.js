// Jest with JupyterLab's preset (ts-jest, jsdom with fetch/Request/Headers).
const jestJupyterLab = require('@jupyterlab/testing/lib/jest-config');

const base = jestJupyterLab(__dirname);

// Packages shipped as ES modules that Babel must transform (the preset's list, plus what the
// output viewer's test loads: Lab's codemirror/outputarea/rendermime and their grammars).
const esModules = [
  '@codemirror',
  '@jupyter/react-components',
  '@jupyter/web-components',
  '@jupyter/ydoc',
  '@jupyterlab/',
  '@lezer',
  '@marijn',
  '@microsoft',
  'color',
  'exenv-es6',
  'lib0',
  'marked',
  'nanoid',
  'vscode-ws-jsonrpc',
  'y-protocols',
  'y-websocket',
  'yjs'
].join('|');

module.exports = {
  ...base,
  automock: false,
  collectCoverageFrom: [
    'src/**/*.{ts,tsx}',
    '!src/**/*.d.ts',
    '!src/__tests__/**'
  ],
  coverageReporters: ['text-summary'],
  reporters: ['default'],
  testRegex: 'src/__tests__/.*\\.spec\\.tsx?$',
  transformIgnorePatterns: [`/node_modules/(?!${esModules}).+`]
};
