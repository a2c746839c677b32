import { pipelineBody } from '../pipelines';

describe('pipelineBody', () => {
  it('makes step notebooks relative to the server root from the file folder', () => {
    const body = pipelineBody(
      'flows/flow.json',
      JSON.stringify({
        steps: [
          { notebook: 'prep.ipynb' },
          { notebook: '../train.ipynb', gpus: 2 }
        ],
        edges: [[0, 1]]
      })
    );
    expect(body.steps).toEqual([
      { notebook: 'flows/prep.ipynb' },
      { notebook: 'train.ipynb', gpus: 2 }
    ]);
    expect(body.edges).toEqual([[0, 1]]);
  });

  it('refuses a file without steps', () => {
    expect(() => pipelineBody('x.json', '{"edges": []}')).toThrow(/steps/);
  });
});
