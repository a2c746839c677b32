#!/usr/bin/env node
/*
 * Build the prebuilt lab extension without asking the network for JupyterLab's core metadata:
 * runs `jupyter labextension build` against the installed JupyterLab's staging/package.json
 * (`--core-package-file`; `--core-path` on JupyterLab versions that lack that option).
 *
 * The `jupyter` used is the first on PATH (under `pip install` that is the build environment's);
 * the installed JupyterLab is found beside it, else by asking that environment's Python.
 * Set JUPYTERLAB_CORE_PACKAGE_FILE to use another core package file.
 *
 * Usage: node scripts/build-labextension.js [--development] [--source-map]
 */
'use strict';

const { execFileSync, spawnSync } = require('child_process');
const fs = require('fs');
const path = require('path');

const EXT_DIR = path.resolve(__dirname, '..');
const WIN = process.platform === 'win32';

function which(name) {
  const exts = WIN
    ? (process.env.PATHEXT || '.EXE;.CMD;.BAT').split(';').concat([''])
    : [''];
  for (const dir of (process.env.PATH || '').split(path.delimiter)) {
    if (!dir) continue;
    for (const ext of exts) {
      const candidate = path.join(dir, name + ext);
      try {
        if (fs.statSync(candidate).isFile()) return candidate;
      } catch {
        // not here
      }
    }
  }
  return null;
}

/** <prefix>/bin/jupyter -> <prefix>/lib/python3.X/site-packages/jupyterlab (or Lib\site-packages on Windows). */
function jupyterlabBeside(jupyter) {
  const prefix = path.dirname(path.dirname(jupyter));
  const roots = [path.join(prefix, 'Lib', 'site-packages')];
  const lib = path.join(prefix, 'lib');
  if (fs.existsSync(lib)) {
    for (const entry of fs.readdirSync(lib)) {
      if (/^python3/.test(entry))
        roots.push(path.join(lib, entry, 'site-packages'));
    }
  }
  for (const root of roots) {
    const dir = path.join(root, 'jupyterlab');
    if (fs.existsSync(path.join(dir, 'staging', 'package.json'))) return dir;
  }
  return null;
}

/** The Python a console script runs with (its shebang), if it names one. */
function pythonOf(script) {
  try {
    const head = fs.readFileSync(script, 'utf8').slice(0, 1024).split('\n');
    if (head[0].startsWith('#!') && /python/.test(head[0]))
      return head[0].slice(2).trim().split(/\s+/)[0];
    const exec = /^'''exec' (\S+)/.exec(head[1] || '');
    if (exec) return exec[1];
  } catch {
    // not a text script (e.g. a Windows launcher)
  }
  return null;
}

function jupyterlabFromPython(python) {
  const code =
    'import os, jupyterlab; print(os.path.dirname(os.path.abspath(jupyterlab.__file__)))';
  for (const py of [python, 'python3', 'python'].filter(Boolean)) {
    try {
      return execFileSync(py, ['-c', code], { encoding: 'utf8' }).trim();
    } catch {
      // try the next
    }
  }
  return null;
}

function main() {
  const args = process.argv.slice(2);
  const jupyter = which('jupyter');
  if (!jupyter) {
    console.error(
      'build-labextension: `jupyter` is not on PATH; install jupyterlab (pip install jupyterlab) first.'
    );
    process.exit(1);
  }
  let coreFile = process.env.JUPYTERLAB_CORE_PACKAGE_FILE || '';
  let labDir = null;
  if (!coreFile) {
    labDir =
      jupyterlabBeside(jupyter) || jupyterlabFromPython(pythonOf(jupyter));
    if (!labDir) {
      console.error(
        `build-labextension: cannot find the jupyterlab package that ${jupyter} belongs to.`
      );
      process.exit(1);
    }
    coreFile = path.join(labDir, 'staging', 'package.json');
  }
  if (!fs.existsSync(coreFile)) {
    console.error(`build-labextension: no core package file at ${coreFile}`);
    process.exit(1);
  }
  // JupyterLab >= 4.6 (jupyter_builder) takes --core-package-file; older ones take --core-path.
  const help = spawnSync(jupyter, ['labextension', 'build', '--help-all'], {
    encoding: 'utf8'
  });
  const coreFlag = /--core-package-file/.test(help.stdout || '')
    ? ['--core-package-file', coreFile]
    : ['--core-path', path.dirname(coreFile)];
  const buildArgs = ['labextension', 'build', ...coreFlag];
  if (args.includes('--development')) buildArgs.push('--development', 'True');
  if (args.includes('--source-map')) buildArgs.push('--source-map', 'True');
  buildArgs.push(EXT_DIR);
  console.log(`build-labextension: ${jupyter} ${buildArgs.join(' ')}`);
  const run = spawnSync(jupyter, buildArgs, { stdio: 'inherit', cwd: EXT_DIR });
  process.exit(run.status === null ? 1 : run.status);
}

main();
