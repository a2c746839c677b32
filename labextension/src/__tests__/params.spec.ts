import {
  PyFloat,
  toJSONText,
  parametersSource,
  parametersToRows,
  parseParametersCell,
  parseValue,
  rowsToParameters,
  stripComment
} from '../params';

describe('parameters cell', () => {
  it('finds the first code cell tagged parameters', () => {
    const cells = [
      {
        cell_type: 'markdown',
        source: 'x = 1',
        metadata: { tags: ['parameters'] }
      },
      { cell_type: 'code', source: ['import os\n'], metadata: {} },
      {
        cell_type: 'code',
        source: ['lr = 0.1\n', 'epochs = 3'],
        metadata: { tags: ['parameters', 'other'] }
      },
      {
        cell_type: 'code',
        source: 'lr = 9',
        metadata: { tags: ['parameters'] }
      }
    ];
    expect(parametersSource(cells)).toBe('lr = 0.1\nepochs = 3');
    expect(
      parametersSource([{ cell_type: 'code', source: 'x = 1', metadata: {} }])
    ).toBeNull();
  });

  it('reads name = value rows, dropping comments and non-assignments', () => {
    const src = [
      '# defaults',
      'lr = 0.1  # learning rate',
      "optimizer: str = 'adam'",
      'tag = "#1"',
      'layers = [64, 64]',
      'if lr > 1:',
      '    lr = 1',
      'x == 2',
      'epochs=3',
      'lr = 0.2'
    ].join('\n');
    expect(parseParametersCell(src)).toEqual([
      { name: 'optimizer', value: "'adam'" },
      { name: 'tag', value: '"#1"' },
      { name: 'layers', value: '[64, 64]' },
      { name: 'epochs', value: '3' },
      { name: 'lr', value: '0.2' }
    ]);
  });

  it('strips comments outside quotes only', () => {
    expect(stripComment("a = 'x # y'  # z")).toBe("a = 'x # y'");
    expect(stripComment('a = 1')).toBe('a = 1');
  });
});

describe('parameter values', () => {
  it.each([
    ['0.1', 0.1],
    ['-3', -3],
    ['1e-4', 1e-4],
    ['True', true],
    ['false', false],
    ['None', null],
    ["'adam'", 'adam'],
    ['"a b"', 'a b'],
    ['[1, 2, 3]', [1, 2, 3]],
    ["{'a': True, 'b': None}", { a: true, b: null }],
    ["['x', 'y',]", ['x', 'y']],
    ['adam', 'adam'],
    ['', ''],
    ['[unclosed', '[unclosed']
  ])('%s -> %j', (text, value) => {
    expect(parseValue(text)).toEqual(value);
  });

  it('keeps whole floats floats in the request body', () => {
    expect(parseValue('3.0')).toBeInstanceOf(PyFloat);
    expect(parseValue('1e3')).toBeInstanceOf(PyFloat);
    expect(parseValue('3')).toBe(3);
    const body = toJSONText({
      a: parseValue('3.0'),
      b: 3,
      c: [parseValue('-2.0')],
      d: 'x',
      e: parseValue('0.5')
    });
    expect(body).toBe('{"a":3.0,"b":3,"c":[-2.0],"d":"x","e":0.5}');
    expect(JSON.parse(body)).toEqual({ a: 3, b: 3, c: [-2], d: 'x', e: 0.5 });
    expect(toJSONText({ s: '\u0000gpusched-float:1' })).toBe(
      JSON.stringify({ s: '\u0000gpusched-float:1' })
    );
  });

  it('builds the parameters object and back', () => {
    const rows = [
      { name: 'lr', value: '0.1' },
      { name: ' ', value: '' },
      { name: 'name', value: "'run-1'" }
    ];
    const params = rowsToParameters(rows);
    expect(params).toEqual({ lr: 0.1, name: 'run-1' });
    expect(parametersToRows({ lr: 0.1, ok: true, none: null, s: 'x' })).toEqual(
      [
        { name: 'lr', value: '0.1' },
        { name: 'ok', value: 'True' },
        { name: 'none', value: 'None' },
        { name: 's', value: '"x"' }
      ]
    );
  });
});
