// The prompt sets of `specbench model` for TinyStories models, and the seed openings of
// `specbench corpus`. Every text here was written for specdec (none is taken from a data set).
#include "tasks.hpp"

#include <algorithm>
#include <array>
#include <filesystem>
#include <fstream>
#include <optional>
#include <stdexcept>

#include "common/cli_checks.hpp"
#include "common/values.hpp"
#include "input_error.hpp"

namespace specbench {

namespace {

// Story openings, the way a TinyStories story starts.
const char* const kStories[] = {
    "Once upon a time, there was a little girl named Lily.",
    "One day, a boy named Tom found a shiny stone in the garden.",
    "There was a big brown dog who lived next to a farm.",
    "Mia had a new red hat. She wanted to show it to her friends.",
    "The sun was hot and the sky was blue.",
    "Ben and his sister Sue liked to play in the sand.",
    "A little bird could not find its nest.",
    "Once upon a time, there was a kind old man who loved to bake bread.",
    "Sam had a toy car that was very fast.",
    "It was a rainy day, and Anna was bored.",
    "In a small town, there lived a happy cat named Tiger.",
    "Max wanted to climb the tall tree in the park.",
    "One morning, Lucy woke up and saw snow outside.",
    "There was a little fish who wanted to see the big sea.",
    "Tim and his mom went to the store to buy apples.",
    "Once upon a time, a small frog lived by a pond.",
    "Jack had a blue kite. He took it to the hill.",
    "The little bear was hungry, so he looked for honey.",
    "Emma loved to draw pictures of flowers.",
    "One day, a duck found a lost shoe by the river.",
    "Lily and her friend Ben built a big tower of blocks.",
    "There once was a princess who did not like to wear shoes.",
    "A boy named Leo had a pet turtle called Slow.",
    "The wind was strong, and the leaves flew everywhere.",
    "Once upon a time, there was a tiny mouse who was very brave.",
    "Sara wanted to help her dad wash the car.",
    "The old clock in the kitchen stopped ticking one night.",
    "Tom liked to jump in puddles.",
    "A girl named Zoe found a box under her bed.",
    "One day, the farmer lost his hat in the field.",
    "There was a little train that could go very far.",
    "Kate had a doll with yellow hair.",
    "The moon was big and bright over the sleeping town.",
    "Once upon a time, a happy sheep lived on a green hill.",
    "Bob wanted to make a cake for his mom.",
    "A little rabbit hopped into the garden to find carrots.",
    "Amy and her brother went to the beach with a bucket.",
    "The school bus was late, so the children waited.",
    "Once upon a time, there was a funny clown who could not smile.",
    "Peter saw a big spider on the wall.",
    "Molly had a cold and had to stay in bed.",
    "The baby elephant wanted to splash in the water.",
    "One night, Sam heard a strange noise outside.",
    "Lily found a small key in the grass.",
    "There was a boy who loved to sing all day.",
    "Grandma gave Jen a warm blue scarf.",
    "The little car was red and very shiny.",
    "Once upon a time, a lonely tree stood in a field.",
    "Ella wanted a puppy more than anything.",
    "The two friends shared a big bowl of soup.",
    "A small boat sailed on the lake.",
    "Dan was sad because his ball was broken.",
    "One sunny day, the children had a picnic in the park.",
    "There was a wise owl who lived in an old tree.",
    "Ruby liked to dance in her pink dress.",
    "The cat and the dog did not like each other.",
    "Once upon a time, there was a king who loved cheese.",
    "Ollie found a feather on his way home.",
    "The little girl was scared of the dark.",
    "A big truck came to fix the road.",
    "Nina had a garden full of tomatoes.",
    "One day, a monkey took a banana from a boy.",
    "The snowman was sad when the sun came out.",
    "Henry wanted to be a pilot when he grew up.",
    "Once upon a time, two ducks went for a swim.",
    "Lucy and her mom made cookies in the kitchen.",
    "There was a lazy cat who slept all day.",
    "Jake lost his tooth at school.",
    "The butterfly landed on a yellow flower.",
    "A little boy named Finn was afraid of the water.",
    "One day, Mia saw a rainbow in the sky.",
    "The pig rolled in the mud and was very happy.",
    "Once upon a time, there was a robot who wanted a friend.",
    "Susie had a box of crayons.",
    "The firemen came to help the cat in the tree.",
    "Tom and Lily went to see the animals at the zoo.",
    "A girl named Rose liked to read books in the garden.",
    "One day, the little dog dug a big hole.",
    "There was a magic pot that could make soup.",
    "Ben could not find his shoes.",
    "The bees were busy in the warm sun.",
    "Once upon a time, a small star fell from the sky.",
    "Ann wanted to ride her bike to the park.",
    "The owl said hello to the little mouse.",
    "Dad took the children fishing on the lake.",
    "A cow named Daisy gave the best milk.",
    "One day, Leo made a paper boat.",
    "The girl put on her boots and went outside.",
    "There was a big hill behind the house.",
    "Once upon a time, there was a shy little horse.",
    "Kim had a bad dream and woke up crying.",
    "The squirrel hid its nuts under a tree.",
    "Jimmy wanted to help his grandpa in the garden.",
    "A little lamb got lost in the woods.",
    "One day, the teacher brought a big box to class.",
    "The baby laughed at the funny dog.",
    "Once upon a time, a girl had a red balloon.",
    "Mark and his dad built a bird house.",
    "The frog jumped onto a big green leaf.",
    "There was a small boy who did not like to share.",
    "Polly the parrot could say many words.",
    "One cold morning, the children made a snowman.",
    "The queen had a golden crown.",
    "Once upon a time, a little ant carried a big crumb.",
    "Ellie lost her favorite toy at the park.",
    "A fox looked at the grapes on the vine.",
    "The little plane flew over the mountains.",
    "Sally and Tim played hide and seek.",
    "One day, a big storm came to the village.",
    "There was a girl who wanted to touch the clouds.",
};

// Copy-heavy prompts: a short story, then the start of its retelling. The model's continuation
// reuses the story's names, phrases and sentences, which copy drafters can find in the prompt.
const char* const kRetell[] = {
    "Lily had a red ball. She took the ball to the park and played with her dog Max. Max ran after "
    "the ball and brought it back. Lily was very happy and gave Max a big hug.\n"
    "Lily had a red ball. She took the ball to the park and",
    "Tom saw a little bird in the garden. The bird was sad because it could not fly. Tom gave the "
    "bird some water and a small piece of bread. The next day, the bird could fly again.\n"
    "Tom saw a little bird in the garden. The bird was sad because",
    "Once upon a time, there was a big cat named Tiger. Tiger liked to sleep in the sun. One day, a "
    "little mouse woke Tiger up. Tiger was angry, but then they became friends.\n"
    "Once upon a time, there was a big cat named Tiger. Tiger liked to",
    "Sue and Ben went to the beach. They made a big sand castle with a tall tower. A wave came and "
    "broke the castle. Sue and Ben laughed and made a new one.\n"
    "Sue and Ben went to the beach. They made a big sand castle",
    "Mia had a little garden. She planted a seed and gave it water every day. The seed grew into a "
    "big yellow flower. Mia showed the flower to her mom.\n"
    "Mia had a little garden. She planted a seed and",
    "Jack wanted to build a boat. He found some wood and a hammer. His dad helped him. They put the "
    "boat on the lake and it did not sink.\n"
    "Jack wanted to build a boat. He found some wood and",
    "There was a little frog named Hop. Hop lived in a pond with his mom. One day, Hop jumped too far "
    "and got lost. His mom found him and they went home together.\n"
    "There was a little frog named Hop. Hop lived in a pond with",
    "Anna had a new doll. The doll had blue eyes and a pink dress. Anna took the doll everywhere. "
    "One day, she lost the doll at school, but her teacher found it.\n"
    "Anna had a new doll. The doll had blue eyes and",
    "The sun was shining and the birds were singing. Tim went outside to play with his kite. The "
    "kite flew high in the sky. Tim ran and laughed all day.\n"
    "The sun was shining and the birds were singing. Tim went outside to",
    "Lucy liked to bake cookies with her grandma. They used sugar, flour and eggs. The cookies "
    "smelled very good. Lucy and her grandma ate them with milk.\n"
    "Lucy liked to bake cookies with her grandma. They used",
    "A small dog named Spot found a bone in the yard. Spot wanted to hide the bone. He dug a hole "
    "under the tree and put the bone inside. Then he took a nap.\n"
    "A small dog named Spot found a bone in the yard. Spot wanted to",
    "Ben had a big red truck. He liked to push the truck in the sand. One day, the truck got stuck. "
    "Ben asked his sister for help, and together they pulled it out.\n"
    "Ben had a big red truck. He liked to push the truck",
    "Once upon a time, there was a kind girl named Sara. Sara saw an old man who was cold. She gave "
    "him her warm blanket. The old man smiled and said thank you.\n"
    "Once upon a time, there was a kind girl named Sara. Sara saw",
    "The little bear wanted some honey. He went to the tree where the bees lived. The bees were "
    "angry and chased him away. The bear ran home to his mom.\n"
    "The little bear wanted some honey. He went to the tree where",
    "Max and Zoe played in the snow. They made a snowman with a carrot nose and a hat. The snowman "
    "was very tall. Max and Zoe were proud of their snowman.\n"
    "Max and Zoe played in the snow. They made a snowman with",
    "Emma found a shiny shell on the beach. She put the shell next to her ear. She could hear the "
    "sea. Emma kept the shell in her room.\n"
    "Emma found a shiny shell on the beach. She put the shell",
    "There was a happy cow named Daisy. Daisy lived on a farm with a pig and a sheep. Every day, they "
    "played in the green field. At night, they slept in the big barn.\n"
    "There was a happy cow named Daisy. Daisy lived on a farm with",
    "Sam lost his blue hat in the park. He looked under the bench and behind the tree. Then his dog "
    "came with the hat in its mouth. Sam was so happy.\n"
    "Sam lost his blue hat in the park. He looked under the bench and",
    "Kate wanted to paint a picture. She took her brush and her paints. She painted a big house and a "
    "yellow sun. Her dad put the picture on the wall.\n"
    "Kate wanted to paint a picture. She took her brush and",
    "One day, a little fish named Blue saw a big boat. Blue was scared and swam away. His friend the "
    "turtle said the boat was not bad. Blue was not scared anymore.\n"
    "One day, a little fish named Blue saw a big boat. Blue was scared and",
    "Tom and his mom went to the store. They bought apples, bread and milk. Tom carried the bag all "
    "the way home. His mom said he was a big helper.\n"
    "Tom and his mom went to the store. They bought",
    "Lily had a little kitten named Fluffy. Fluffy liked to play with yarn. One day, Fluffy got "
    "stuck in the yarn. Lily helped Fluffy and they both laughed.\n"
    "Lily had a little kitten named Fluffy. Fluffy liked to play with",
    "There was a big tree in the park. Many birds lived in the tree. One day, a man wanted to cut the "
    "tree. The children asked him to stop, and he did.\n"
    "There was a big tree in the park. Many birds lived in",
    "Amy wanted to go to the moon. She made a rocket out of a big box. She sat in the box and closed "
    "her eyes. In her dream, she flew to the moon.\n"
    "Amy wanted to go to the moon. She made a rocket out of",
    "Once upon a time, there was a little train named Toot. Toot carried toys to the children in the "
    "town. One day, Toot was very tired. The children helped Toot up the hill.\n"
    "Once upon a time, there was a little train named Toot. Toot carried",
    "Jenny had a pink bike. She rode the bike to her friend's house. On the way, she fell down and hurt "
    "her knee. Her friend gave her a hug and a band-aid.\n"
    "Jenny had a pink bike. She rode the bike to",
    "The rain fell all day. Ben and Lily could not go outside. They built a fort with pillows and "
    "blankets. They read books in the fort until the rain stopped.\n"
    "The rain fell all day. Ben and Lily could not go outside. They built",
    "A little duck named Quack could not swim. The other ducks laughed at him. His mom showed him how "
    "to move his feet. Soon Quack could swim very fast.\n"
    "A little duck named Quack could not swim. The other ducks",
    "Leo had a magic stick. When he waved the stick, flowers grew. He made flowers grow all over the "
    "park. Everyone in the town was happy.\n"
    "Leo had a magic stick. When he waved the stick,",
    "Mom made a big cake for Sara's birthday. The cake had pink candles. Sara blew out the candles and "
    "made a wish. Then all her friends ate the cake.\n"
    "Mom made a big cake for Sara's birthday. The cake had",
};

// The seed openings of a corpus are made from these parts: "Once upon a time, there was a
// {kind} {who} named {name}. {pronoun} {likes}." and a few other shapes. None equals a prompt
// of the tasks above (checked in corpus_openings).
constexpr std::array kNames{"Lola", "Jasper", "Nora", "Ivan", "Greta", "Oscar", "Pia", "Rudy", "Tess", "Ugo",
                            "Vera", "Wes", "Yara", "Abel", "Bea", "Cody", "Dora", "Eli", "Fay", "Gus"};
constexpr std::array kWho{"girl", "boy", "puppy", "kitten", "bunny", "duckling", "pony", "squirrel"};
constexpr std::array kKind{"little", "happy", "curious", "silly", "brave", "sleepy"};
constexpr std::array kLikes{"liked to run in the grass",      "loved to play with a ball",
                            "wanted to find a treasure",     "was afraid of loud noises",
                            "liked to look at the stars",    "wanted to make a new friend",
                            "loved to eat sweet apples",     "did not like to take a bath"};
constexpr std::array kShapes{"Once upon a time, there was a {kind} {who} named {name}. {Pron} {likes}.",
                             "{name} was a {kind} {who}. Every day, {pron} {likes}.",
                             "One day, a {kind} {who} named {name} went outside. {Pron} {likes}."};

std::string replace_all(std::string text, const std::string& key, const std::string& value) {
  for (std::size_t at = text.find(key); at != std::string::npos; at = text.find(key, at + value.size()))
    text.replace(at, key.size(), value);
  return text;
}

std::vector<std::string> prompts_of(std::span<const char* const> texts) { return {texts.begin(), texts.end()}; }

}  // namespace

const std::vector<Task>& builtin_tasks() {
  static const std::vector<Task> tasks{
      {"stories", "TinyStories-style story openings", prompts_of(kStories)},
      {"retell", "a short story, then the start of its retelling (copy-heavy)", prompts_of(kRetell)},
  };
  return tasks;
}

std::vector<const Task*> find_tasks(std::span<const std::string> names) {
  const auto& tasks = builtin_tasks();
  std::vector<std::string> known;
  for (const Task& t : tasks) known.push_back(t.name);
  const std::string list = "the tasks are: " + specdec::tools::joined_names(known) + " (or all)";
  known.push_back("all");
  const std::vector<std::string> given = specdec::tools::list_items(std::vector<std::string>(names.begin(), names.end()));
  if (given.empty()) throw input_error("no task is named; " + list);
  std::vector<const Task*> chosen;
  for (const std::string& name : given) {
    const std::optional<std::size_t> i = specdec::tools::name_index(name, known);
    if (!i) throw input_error("unknown task '" + name + "'; " + list);
    if (*i < tasks.size()) chosen.push_back(&tasks[*i]);
    else for (const Task& t : tasks) chosen.push_back(&t);  // all
  }
  std::sort(chosen.begin(), chosen.end());
  chosen.erase(std::unique(chosen.begin(), chosen.end()), chosen.end());
  return chosen;
}

Task load_task(const std::string& path) {
  specdec::tools::check_input_file<input_error>(path, "prompts file");
  std::ifstream in(path);
  if (!in) throw input_error("cannot read the prompts file '" + path + "'");
  Task task{std::filesystem::path(path).stem().string(), "prompts from " + path, {}};
  std::string raw;
  for (int number = 1; std::getline(in, raw); ++number) {
    const std::string line = specdec::tools::text_line<input_error>(raw, number, "the prompts file '" + path + "'");
    if (line.find_first_not_of(" \t") == std::string::npos) continue;  // blank, whatever an editor left on it
    task.prompts.push_back(replace_all(line, "\\n", "\n"));
  }
  if (task.prompts.empty()) throw input_error("the prompts file '" + path + "' has no prompt");
  return task;
}

std::vector<std::string> corpus_openings() {
  std::vector<std::string> openings;
  for (const char* shape : kShapes)
    for (const char* name : kNames)
      for (std::size_t w = 0; w < kWho.size(); ++w)
        for (const char* kind : kKind)
          for (const char* likes : kLikes) {
            const bool girl = w == 0 || (w >= 2 && name[0] < 'M');  // pronouns by a fixed rule
            std::string text = replace_all(shape, "{kind}", kind);
            text = replace_all(text, "{who}", kWho[w]);
            text = replace_all(text, "{name}", name);
            text = replace_all(text, "{likes}", likes);
            text = replace_all(text, "{Pron}", girl ? "She" : "He");
            openings.push_back(replace_all(text, "{pron}", girl ? "she" : "he"));
          }
  for (const Task& task : builtin_tasks())
    for (const std::string& prompt : task.prompts)
      if (std::find(openings.begin(), openings.end(), prompt) != openings.end())
        throw std::logic_error("corpus opening equals a prompt of task " + task.name + ": " + prompt);
  return openings;
}

}  // namespace specbench
