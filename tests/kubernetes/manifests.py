"""The manifests of deploy/ against their published schemas, offline.

Kubernetes' own kinds (Deployment, Service, PersistentVolumeClaim) go through
kubernetes-validate (PyPI), which carries the JSON schemas generated from
Kubernetes' OpenAPI document, strict (an unknown field is an error).

KServe publishes its CRDs' schemas as the models of its Python SDK (the kserve
wheel on PyPI, generated from the same OpenAPI document as the CRDs): each
class lists its fields (attribute_map), their types (openapi_types) and which
must be set.  They are read here from the wheel's source with `ast`, without
importing kserve (whose imports pull in a web server), and every KServe object
is walked against them: unknown fields, wrong types, missing required ones.
The Kubernetes types KServe embeds (V1Container, V1Toleration, ...) are checked
by kubernetes-validate's schema of that type.
"""
import ast
import importlib.util
import json
import os
import re

import jsonschema
import kubernetes_validate
import yaml
from referencing import Registry, Resource

K8S_VERSION = "1.37.0"


class Problems(list):
    def add(self, where, what):
        self.append("%s: %s" % (where or "(top)", what))


def _k8s_schema_dir():
    base = os.path.dirname(kubernetes_validate.__file__)
    return os.path.join(base, "kubernetes-json-schema", "v%s-local-strict" % K8S_VERSION)


class K8sTypes:
    """Kubernetes' definitions, by the Python client's class name (V1Container)."""

    def __init__(self):
        with open(os.path.join(_k8s_schema_dir(), "_definitions.json")) as f:
            defs = json.load(f)
        self.registry = Resource.from_contents(defs) @ Registry()
        self.keys = {}
        for key in defs["$defs"]:
            # io.k8s.api.core.v1.Container -> V1Container
            parts = key.split(".")
            if len(parts) >= 2:
                ver, name = parts[-2], parts[-1]
                self.keys.setdefault(ver[:1].upper() + ver[1:] + name, []).append(key)

    def has(self, cls):
        return cls in self.keys

    def check(self, cls, value, where, problems):
        keys = self.keys[cls]
        if len(keys) != 1:
            problems.add(where, "ambiguous Kubernetes type %s: %s" % (cls, keys))
            return
        schema = {"$ref": "https://kubernetes.io/api/_definitions.json#/$defs/" + keys[0]}
        v = jsonschema.validators.Draft202012Validator(schema, registry=self.registry)
        for e in v.iter_errors(value):
            path = ".".join(str(p) for p in e.absolute_path)
            problems.add(where + ("." + path if path else ""), e.message)


class KServeTypes:
    """KServe's models, from the kserve wheel's kserve/models/*.py."""

    def __init__(self):
        spec = importlib.util.find_spec("kserve")
        if spec is None or not spec.submodule_search_locations:
            raise RuntimeError("the kserve wheel is not installed")
        models = os.path.join(list(spec.submodule_search_locations)[0], "models")
        self.classes = {}
        for name in sorted(os.listdir(models)):
            if name.endswith(".py") and name != "__init__.py":
                self._read(os.path.join(models, name))
        if "V1beta1InferenceService" not in self.classes:
            raise RuntimeError("no InferenceService model in " + models)

    def _read(self, path):
        with open(path) as f:
            src = f.read()
        tree = ast.parse(src)
        for node in tree.body:
            if not isinstance(node, ast.ClassDef):
                continue
            fields = {}
            for stmt in node.body:
                if isinstance(stmt, ast.Assign) and isinstance(stmt.targets[0], ast.Name):
                    if stmt.targets[0].id in ("openapi_types", "attribute_map"):
                        fields[stmt.targets[0].id] = ast.literal_eval(stmt.value)
            if "openapi_types" not in fields:
                continue
            types, names = fields["openapi_types"], fields["attribute_map"]
            required = set(re.findall(r"Invalid value for `(\w+)`, must not be `None`", src))
            self.classes[node.name] = {
                "fields": {names[k]: types[k] for k in types},
                "required": {names[k] for k in required if k in names},
            }


class Checker:
    def __init__(self):
        self.k8s = K8sTypes()
        self.kserve = KServeTypes()

    def check_type(self, t, value, where, problems):
        scalars = {"str": str, "bool": bool, "float": (int, float), "object": object}
        if t == "int":
            if not isinstance(value, int) or isinstance(value, bool):
                problems.add(where, "%r is not an integer" % (value,))
        elif t in scalars:
            if not isinstance(value, scalars[t]) or (t != "bool" and isinstance(value, bool)):
                problems.add(where, "%r is not %s" % (value, t))
        elif t == "datetime":
            if not isinstance(value, str):
                problems.add(where, "%r is not a date-time string" % (value,))
        elif t.startswith("list["):
            if not isinstance(value, list):
                problems.add(where, "not a list")
                return
            for i, item in enumerate(value):
                self.check_type(t[5:-1], item, "%s[%d]" % (where, i), problems)
        elif t.startswith("dict("):
            if not isinstance(value, dict):
                problems.add(where, "not a mapping")
                return
            inner = t[5:-1].split(", ", 1)[1]
            for k, item in value.items():
                if not isinstance(k, str):
                    problems.add(where, "key %r is not a string" % (k,))
                self.check_type(inner, item, "%s.%s" % (where, k), problems)
        elif t in self.kserve.classes:
            self.check_object(t, value, where, problems)
        elif self.k8s.has(t):
            self.k8s.check(t, value, where, problems)
        else:
            problems.add(where, "type %s is in neither KServe's models nor Kubernetes'" % t)

    def check_object(self, cls, value, where, problems):
        if not isinstance(value, dict):
            problems.add(where, "not an object (%s)" % cls)
            return
        model = self.kserve.classes[cls]
        for key, item in value.items():
            if key not in model["fields"]:
                problems.add(where, "unknown field %r of %s" % (key, cls))
            else:
                self.check_type(model["fields"][key], item, (where + "." if where else "") + key,
                                problems)
        for key in sorted(model["required"] - set(value)):
            problems.add(where, "%s needs %r" % (cls, key))

    def check_document(self, doc):
        """The problems of one manifest document, [] when it validates."""
        problems = Problems()
        group, _, version = doc.get("apiVersion", "").rpartition("/")
        if group == "serving.kserve.io":
            cls = version[:1].upper() + version[1:] + doc.get("kind", "")
            if cls not in self.kserve.classes:
                problems.add("", "KServe has no %s %s" % (doc.get("apiVersion"), doc.get("kind")))
            else:
                self.check_object(cls, doc, "", problems)
            return problems
        try:
            kubernetes_validate.validate(doc, K8S_VERSION, strict=True)
        except kubernetes_validate.ValidationError as e:
            path = ".".join(str(p) for p in e.path)
            problems.add(path, e.message)
        except kubernetes_validate.SchemaNotFoundError as e:
            problems.add("", e.message)
        return problems


def load(path):
    with open(path) as f:
        return [d for d in yaml.safe_load_all(f) if d]


def containers(doc):
    """(where, container) of every container a manifest document runs."""
    spec = doc.get("spec", {})
    kind = doc.get("kind")
    if kind == "Deployment":
        pod = spec["template"]["spec"]
        return [("spec.template.spec.containers[%d]" % i, c) for i, c in enumerate(pod["containers"])]
    if kind in ("ServingRuntime", "ClusterServingRuntime"):
        return [("spec.containers[%d]" % i, c) for i, c in enumerate(spec.get("containers", []))]
    return []
