// libyaml (libyaml-dev). No wrappers needed: the event API imports as is.
#ifndef CYAML_SHIM_H
#define CYAML_SHIM_H
#include <yaml.h>
#endif
