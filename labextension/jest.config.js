// Jest with JupyterLab's preset (ts-jest, jsdom with fetch/Request/Headers).
const jestJupyterLab = require('@jupyterlab/testing/lib/jest-config');

const base = jestJupyterLab(__dirname);

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
  testRegex: 'src/__tests__/.*\\.spec\\.tsx?$'
};
